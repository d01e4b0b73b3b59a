import { InvalidArgumentError } from "commander";

/**
 * The argument parser of an integer option (`.option("--limit <n>", "…", wholeNumber())`): a whole
 * number, at least `min` (0 unless given); anything else is refused the commander way, naming the
 * option and the value.
 */
export function wholeNumber(min = 0): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isInteger(n) || n < min) {
      throw new InvalidArgumentError(
        min === 1
          ? "must be a positive whole number"
          : `must be a whole number${min > 0 ? ` of at least ${min}` : ""}`,
      );
    }
    return n;
  };
}
