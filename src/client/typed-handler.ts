import { AcpError, type IssueLike, problemsOf } from "../protocol/index.js";
import type { InboundContext, RequestHandler } from "./types.js";

type Body = Record<string, unknown>;
type Validation<T> =
  | { readonly value: T; readonly issues?: undefined }
  | { readonly issues: readonly IssueLike[] };

/**
 * A schema a typed handler validates its body with: a zod object schema, or any Standard Schema
 * whose output is a JSON object. Only its `~standard` member is used.
 */
export interface BodySchema<T extends Body = Body> {
  readonly "~standard": {
    validate(value: unknown): Validation<T> | Promise<Validation<T>>;
    readonly types?: { readonly output: T } | undefined;
  };
}

/** The body type a schema validates to: `z.infer` for zod. */
export type BodyOf<S extends BodySchema> = NonNullable<S["~standard"]["types"]>["output"];

/** A request handler whose body was validated (and typed) by its schema before it runs. */
export type TypedRequestHandler<T extends Body> = (body: T, context: InboundContext) => unknown;

/** The schemas of a typed handler: `body` validates the request's body. */
export interface RequestSchemas<S extends BodySchema> {
  body: S;
}

/**
 * Wraps a typed handler: the body is validated first, and a body that does not match is refused
 * with -32602 InvalidParams, `data.problems` locating each fault under `/params/body`, before the
 * handler runs. The handler gets the schema's output (defaults applied, transforms run).
 */
export function validatedHandler<S extends BodySchema>(
  method: string,
  schemas: RequestSchemas<S>,
  handler: TypedRequestHandler<BodyOf<S>>,
): RequestHandler {
  const validate = schemas.body["~standard"].validate.bind(schemas.body["~standard"]);
  return async (body, context) => {
    const result = await validate(body);
    if (result.issues) {
      const problems = problemsOf(result.issues, "/params/body");
      const first = problems[0];
      throw new AcpError(
        "InvalidParams",
        `invalid body for ${method}${first ? `: ${first.path} ${first.message}` : ""}`,
        { problems },
      );
    }
    return handler(result.value as BodyOf<S>, context);
  };
}

/** True for the schemas argument of a typed `onRequest` (the overloads' second argument). */
export function isRequestSchemas(value: unknown): value is RequestSchemas<BodySchema> {
  return typeof value === "object" && value !== null && "body" in value;
}
