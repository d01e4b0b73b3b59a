import { AcpError } from "../protocol/index.js";
import { DASHBOARD_API, type PrincipalView } from "../wire/api.js";
import { type RestAnswer, restRecord } from "../wire/deprecated-names.js";
import { normaliseGatewayUrl } from "./http.js";
import { requestGatewayJson } from "./request.js";

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
  add(principalId: string): Promise<RestAnswer<{ principalId: string; token: string }>> {
    return this.call("POST", "/principals", { principal_id: principalId }) as Promise<
      RestAnswer<{ principalId: string; token: string }>
    >;
  }

  /** Every principal with a dashboard token (the tokens themselves are never shown again). */
  async list(): Promise<RestAnswer<PrincipalView>[]> {
    return ((await this.call("GET", "/principals")) as { principals: RestAnswer<PrincipalView>[] })
      .principals;
  }

  /** Revokes the principal's token: the dashboard refuses it from then on. */
  revoke(principalId: string): Promise<RestAnswer<PrincipalView>> {
    return this.call("POST", `/principals/${encodeURIComponent(principalId)}/revoke`) as Promise<
      RestAnswer<PrincipalView>
    >;
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    try {
      // An older gateway's camelCase answer reads the same way.
      return restRecord(
        await requestGatewayJson(this.baseUrl, method, `${DASHBOARD_API}${path}`, {
          headers: { authorization: `Bearer ${this.options.adminToken}` },
          ...(body !== undefined ? { body } : {}),
        }),
      );
    } catch (err) {
      if (err instanceof AcpError && err.kind === "InternalError" && err.data.httpStatus === 404) {
        throw new AcpError(
          "NotFound",
          `${this.baseUrl} has no dashboard API (is it an acp gateway of this version?)`,
        );
      }
      throw err;
    }
  }
}
