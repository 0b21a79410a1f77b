// Each request's logger (Fastify's request.log, its request id bound), made when it first logs.
// Fastify makes a pino child per request; with request logging off nearly no request logs, and a
// child costs about a microsecond on every read (pino copies and serializes its bindings).
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, LevelWithSilentOrString } from 'pino';

type Log = FastifyBaseLogger;

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
  // (each log method: a level the request's logger would drop makes no child either)
  fatal(...args: Parameters<Log['fatal']>): void {
    if (this.enabled('fatal')) this.log.fatal(...args);
  }
  error(...args: Parameters<Log['error']>): void {
    if (this.enabled('error')) this.log.error(...args);
  }
  warn(...args: Parameters<Log['warn']>): void {
    if (this.enabled('warn')) this.log.warn(...args);
  }
  info(...args: Parameters<Log['info']>): void {
    if (this.enabled('info')) this.log.info(...args);
  }
  debug(...args: Parameters<Log['debug']>): void {
    if (this.enabled('debug')) this.log.debug(...args);
  }
  trace(...args: Parameters<Log['trace']>): void {
    if (this.enabled('trace')) this.log.trace(...args);
  }
  silent(): void {}

  private enabled(level: Level): boolean {
    return this.made !== null || this.options.level !== undefined || this.isLevelEnabled(level);
  }
}
