/** Highest protocol version both agents support (semver order), or undefined. */
export function negotiateVersion(a: readonly string[], b: readonly string[]): string | undefined {
  const theirs = new Set(b);
  const common = a.filter((v) => theirs.has(v));
  const key = (v: string) => v.split(".").map(Number);
  return common.sort((x, y) => {
    const [p, q] = [key(x), key(y)];
    for (let i = 0; i < 3; i++) if ((p[i] ?? 0) !== (q[i] ?? 0)) return (q[i] ?? 0) - (p[i] ?? 0);
    return 0;
  })[0];
}
