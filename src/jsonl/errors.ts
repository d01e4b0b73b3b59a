/** An append-only log that cannot be written as asked; the message names the file when known. */
export class AppendLogError extends Error {
  constructor(
    readonly detail: string,
    readonly file?: string,
  ) {
    super(file === undefined ? detail : `${file}: ${detail}`);
    this.name = "AppendLogError";
  }
}
