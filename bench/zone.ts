// What the benchmarks' DNS server answers (bench/dns-server.ts; never the system's resolvers): the
// senders the benchmarks use publish SPF and DMARC, so every message's authentication checks get
// real answers, as on a server that receives real mail; any other name is NXDOMAIN (smtp-source's
// sender, and the DKIM selector of the realistic message, whose key is not published).
export const BENCH_ZONE = {
  txt: {
    'bench.example': ['v=spf1 ip4:127.0.0.1 -all'],
    '_dmarc.bench.example': ['v=DMARC1; p=none'],
    'beispiel.example': ['v=spf1 ip4:127.0.0.1 ~all'],
    '_dmarc.beispiel.example': ['v=DMARC1; p=quarantine'],
  },
};
