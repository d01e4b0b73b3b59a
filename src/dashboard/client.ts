import { errorFromObject, GatewayUnreachableError, normaliseGatewayUrl } from "../client/index.js";
import { AcpError } from "../protocol/index.js";
import type { PrincipalView } from "./principals.js";
import { DASHBOARD_API } from "./services.js";

/**
 * The dashboard's administrative API (principal tokens) over HTTP, with the gateway's admin token.
 * Non-2xx answers become the AcpError the gateway sent, with the HTTP status in `data.httpStatus`.
 */
export class PrincipalAdminClient {
  private readonly baseUrl: string;

  constructor(private readonly options: { gateway: string; adminToken: string }) {
    this.baseUrl = normaliseGatewayUrl(options.gateway);
  }

  /** Issues a token; it is shown only in this answer. */
  add(principalId: string): Promise<{ principalId: string; token: string }> {
    return this.call("POST", "/principals", { principalId }) as Promise<{
      principalId: string;
      token: string;
    }>;
  }

  async list(): Promise<PrincipalView[]> {
    return ((await this.call("GET", "/principals")) as { principals: PrincipalView[] }).principals;
  }

  revoke(principalId: string): Promise<PrincipalView> {
    return this.call(
      "POST",
      `/principals/${encodeURIComponent(principalId)}/revoke`,
    ) as Promise<PrincipalView>;
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${DASHBOARD_API}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.options.adminToken}`,
          accept: "application/json",
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      throw new GatewayUnreachableError(this.baseUrl, err);
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === "" ? {} : JSON.parse(text);
    } catch {
      throw new AcpError(
        "InternalError",
        `${method} ${path}: the gateway answered ${response.status} with non-JSON`,
      );
    }
    if (response.ok) return parsed;
    const error = (parsed as { error?: { code?: unknown; message?: unknown; data?: unknown } }).error;
    if (typeof error?.code === "number" && typeof error.message === "string") {
      throw errorFromObject(
        { code: error.code, message: error.message, data: error.data },
        { httpStatus: response.status },
      );
    }
    if (response.status === 404) {
      throw new AcpError(
        "NotFound",
        `${this.baseUrl} has no dashboard API (is it an acp gateway of this version?)`,
      );
    }
    throw new AcpError("InternalError", `${method} ${path}: the gateway answered ${response.status}`);
  }
}
