// Each request's logger (Fastify's request.log, its request id bound), made when it first logs.
// Fastify makes a pino child per request; with request logging off nearly no request logs, and a
// child costs about a microsecond on every read (pino copies and serializes its bindings).
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, LevelWithSilentOrString } from 'pino';

type Log = FastifyBaseLogger;
type LogArgs = Parameters<Log['info']>;

/** The childLoggerFactory of buildApp: a logger that becomes `parent.child(bindings, options)` on first use. */
export function lazyRequestLogger(parent: Log, bindings: Bindings, options: ChildLoggerOptions): Log {
  return new RequestLog(parent, bindings, options) as unknown as Log;
}

class RequestLog {
  private made: Log | null = null;
  constructor(
    private readonly parent: Log,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get log(): Log {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }
  get level(): LevelWithSilentOrString {
    return this.made ? this.made.level : this.options.level ?? this.parent.level;
  }
  set level(level: LevelWithSilentOrString) {
    this.log.level = level;
  }
  isLevelEnabled(level: Level): boolean {
    return ((this.made ?? this.parent) as unknown as { isLevelEnabled?(level: Level): boolean }).isLevelEnabled?.(level) ?? true;
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): Log {
    return this.log.child(bindings, options);
  }
  fatal(...args: LogArgs): void {
    this.write('fatal', args);
  }
  error(...args: LogArgs): void {
    this.write('error', args);
  }
  warn(...args: LogArgs): void {
    this.write('warn', args);
  }
  info(...args: LogArgs): void {
    this.write('info', args);
  }
  debug(...args: LogArgs): void {
    this.write('debug', args);
  }
  trace(...args: LogArgs): void {
    this.write('trace', args);
  }
  silent(): void {}

  /** Every log method: a level the request's logger would drop makes no child either. */
  private write(level: Level, args: LogArgs): void {
    if (this.made === null && this.options.level === undefined && !this.isLevelEnabled(level)) return;
    (this.log[level] as (...a: LogArgs) => void)(...args);
  }
}
