import { Argument, type Command, Option } from "commander";
import type { LeafSpec, OptionSpec } from "../leaf-spec.js";
import { COMMON_OPTIONS, SEVERITY_OPTION } from "./session-log-update.js";

/** --root, --session and --json on every command, so they can be given after the command name. */
export function leaf(
  parent: Command,
  name: string,
  description: string,
  sessionHelp: string = COMMON_OPTIONS.session.description,
): Command {
  return parent
    .command(name)
    .description(description)
    .addOption(commanderOption(COMMON_OPTIONS.root))
    .addOption(commanderOption({ ...COMMON_OPTIONS.session, description: sessionHelp }))
    .addOption(commanderOption(COMMON_OPTIONS.json));
}

/** Registers a command described as data (leaf-spec.ts): its arguments, its options, its action. */
export function registerLeaf(parent: Command, spec: LeafSpec): Command {
  const command = parent.command(spec.name).description(spec.description);
  for (const { name, description, choices } of spec.arguments) {
    const argument = new Argument(name, description);
    command.addArgument(choices ? argument.choices(choices) : argument);
  }
  for (const option of spec.options) command.addOption(commanderOption(option));
  return command.action((...values: unknown[]) =>
    spec.run(
      values.slice(0, spec.arguments.length) as (string | undefined)[],
      values[spec.arguments.length] as Record<string, string | true | undefined>,
    ),
  );
}

function commanderOption({ flags, description, choices }: OptionSpec): Option {
  const option = new Option(flags, description);
  return choices ? option.choices(choices) : option;
}

/** The whole coordination library, for the commands that are not on an agent's hot path. */
export const coordination = () => import("../../coordination/index.js");
export const severityOption = () => commanderOption(SEVERITY_OPTION);
export const suffixOption = () =>
  new Option("--suffix <text>", "only agents whose name ends with this (e.g. analyzer)");
