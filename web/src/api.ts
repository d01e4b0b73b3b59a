/**
 * The dashboard API (`/api/v1/dashboard`), with the viewer's token as a Bearer credential; the
 * gateway's own admin API (`/api/v1/...`, e.g. federation) through `admin`, for the admin's views.
 */
const BASE = "api/v1/dashboard";
const ADMIN_BASE = "api/v1";
const TOKEN_KEY = "acp.dashboard.token";

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly problems: { path: string; message: string }[] = [],
  ) {
    super(message);
  }
}

/** Kept for the browser tab's life only: closing the tab signs out. */
export const tokenStore = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (token: string): void => sessionStorage.setItem(TOKEN_KEY, token),
  clear: (): void => sessionStorage.removeItem(TOKEN_KEY),
};

export type Query = Record<string, string | number | undefined>;

function urlOf(path: string, query: Query = {}, base = BASE): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query))
    if (value !== undefined && value !== "") params.set(key, String(value));
  const text = params.toString();
  return `${base}${path}${text ? `?${text}` : ""}`;
}

export class Api {
  /** Called when the token stops working (revoked, gateway restarted with another admin token). */
  onUnauthorized: () => void = () => undefined;

  constructor(private readonly token: string) {}

  get<T>(path: string, query?: Query): Promise<T> {
    return this.call<T>("GET", urlOf(path, query));
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.call<T>("POST", urlOf(path), body);
  }

  /** The gateway's admin API outside the dashboard's (`/api/v1<path>`): the admin token only. */
  readonly admin = {
    get: <T>(path: string): Promise<T> => this.call<T>("GET", urlOf(path, {}, ADMIN_BASE)),
    post: <T>(path: string, body?: unknown): Promise<T> =>
      this.call<T>("POST", urlOf(path, {}, ADMIN_BASE), body),
  };

  private async call<T>(method: string, url: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          accept: "application/json",
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch {
      throw new ApiError("The gateway cannot be reached.", 0);
    }
    const text = await response.text();
    let parsed: unknown = {};
    try {
      parsed = text === "" ? {} : JSON.parse(text);
    } catch {
      throw new ApiError(
        `The gateway answered ${response.status} with something that is not JSON.`,
        response.status,
      );
    }
    if (response.ok) return parsed as T;
    const error = (parsed as { error?: { message?: string; data?: { problems?: ApiError["problems"] } } })
      .error;
    if (response.status === 401) this.onUnauthorized();
    throw new ApiError(
      error?.message ?? `HTTP ${response.status}`,
      response.status,
      error?.data?.problems ?? [],
    );
  }

  /**
   * Follows the live stream (Server-Sent Events read through fetch, so the token travels in a
   * header, not the URL). Reconnects after a drop; returns a function that stops it.
   */
  follow(
    onEvent: (event: string, data: unknown) => void,
    onState: (state: "live" | "reconnecting") => void,
  ): () => void {
    const controller = new AbortController();
    const run = async () => {
      while (!controller.signal.aborted) {
        try {
          const response = await fetch(urlOf("/stream"), {
            headers: { authorization: `Bearer ${this.token}`, accept: "text/event-stream" },
            signal: controller.signal,
          });
          if (response.status === 401) {
            this.onUnauthorized();
            return;
          }
          if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
          onState("live");
          await readEvents(response.body, onEvent);
        } catch {
          if (controller.signal.aborted) return;
        }
        onState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, 3000));
      }
    };
    void run();
    return () => controller.abort();
  }
}

/** Parses an SSE body: `event:` and `data:` lines, a blank line ends an event, `:` lines are comments. */
async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (event: string, data: unknown) => void) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let newline = buffer.indexOf("\n");
    while (newline !== -1) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length > 0) onEvent(event, JSON.parse(data.join("\n")));
        event = "message";
        data = [];
      } else if (line.startsWith("event:")) {
        event = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).trimStart());
      }
      newline = buffer.indexOf("\n");
    }
  }
}
