/**
 * A command described as data: its arguments and options, read both by commander, which registers
 * them (`registerLeaf` in commands/session-shared.ts), and by the fast path's parser (`parseLeaf`,
 * used by fast-path.ts), so the two cannot disagree about what a command takes. No commander here:
 * the fast path starts without it.
 */

/** An option: commander's flags, `--name` for a switch or `--name <value>` for one that takes a value. */
export interface OptionSpec {
  flags: `--${string}`;
  description?: string;
  /** The values it accepts (commander refuses any other, naming them). */
  choices?: readonly string[];
}

/** A positional argument: `<name>` when required, `[name]` when optional. */
export interface ArgumentSpec {
  name: `<${string}>` | `[${string}]`;
  description?: string;
  choices?: readonly string[];
}

/** What an option is given: its value, or true for a switch; absent when not given. */
export type OptionValues = Record<string, string | true | undefined>;

/** A leaf command: its arguments and options, and what it does with their values. */
export interface LeafSpec {
  name: string;
  description: string;
  arguments: readonly ArgumentSpec[];
  options: readonly OptionSpec[];
  /** Runs the command; `operands` holds one value per argument (undefined for an optional one not given). */
  run(operands: readonly (string | undefined)[], options: OptionValues): Promise<void>;
}

/** The long flag (`--depends-on`) and the key of its value (`dependsOn`), as commander names them. */
export function optionNames(option: OptionSpec): { flag: string; key: string; takesValue: boolean } {
  const [flag = option.flags, value] = option.flags.split(" ");
  const key = flag.slice(2).replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
  return { flag, key, takesValue: value !== undefined };
}

/**
 * The operands and option values commander would give `spec`'s action for `args` (the words after
 * the command's name), or undefined for any command line it might read otherwise or refuse: help
 * and version flags, an unknown or repeated option, a value starting with `-`, `--`, a value outside
 * its choices, a missing or extra argument. Those go to commander, which runs or refuses them with
 * its own messages. Accepted: operands and the spec's options in any order, `--name value` and
 * `--name=value`.
 */
export function parseLeaf(
  spec: LeafSpec,
  args: readonly string[],
): { operands: (string | undefined)[]; options: OptionValues } | undefined {
  const operands: (string | undefined)[] = [];
  const options: OptionValues = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg.length < 2 || !arg.startsWith("-")) {
      operands.push(arg);
      continue;
    }
    const equals = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const flag = equals === -1 ? arg : arg.slice(0, equals);
    const option = spec.options.find((o) => optionNames(o).flag === flag);
    if (option === undefined) return undefined;
    const { key, takesValue } = optionNames(option);
    if (key in options) return undefined;
    if (!takesValue) {
      if (equals !== -1) return undefined;
      options[key] = true;
      continue;
    }
    const value = equals === -1 ? args[++i] : arg.slice(equals + 1);
    if (value === undefined || (value.length > 1 && value.startsWith("-"))) return undefined;
    if (option.choices !== undefined && !option.choices.includes(value)) return undefined;
    options[key] = value;
  }
  const required = spec.arguments.filter((a) => a.name.startsWith("<")).length;
  if (operands.length < required || operands.length > spec.arguments.length) return undefined;
  for (const [index, argument] of spec.arguments.entries()) {
    const value = operands[index];
    if (value !== undefined && argument.choices !== undefined && !argument.choices.includes(value))
      return undefined;
  }
  while (operands.length < spec.arguments.length) operands.push(undefined);
  return { operands, options };
}
