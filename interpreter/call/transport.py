"""The httpx boundary: every httpx exception becomes one of errors.py's UpstreamErrors
here and nowhere else.

request.py sends through `mapped`, response.py reads answers through `body_chunks`, and
auth.py's login, refresh and logout requests go through `mapped` too, so the rest of the
engine (and auth's own decisions: log in later when Arcane is unreachable) only ever sees
ArcaneTimeout and ArcaneUnreachable, with `sent` saying whether the request may have
reached Arcane. `interp update-spec` fetches a document through `fetch` (SpecSourceError).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx

from ..errors import ArcaneTimeout, ArcaneUnreachable, SpecSourceError

API_PREFIX = "/api"  # every Arcane REST route lives under <ARCANE_URL>/api
# an OpenAPI document read (update-spec, doctor, the server's drift check) stops at this size
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


def arcane_url(client: httpx.AsyncClient) -> str:
    """The ARCANE_URL a client was made for (its base URL without /api)."""
    return str(client.base_url).rstrip("/").removesuffix(API_PREFIX)


@contextmanager
def mapped(client: httpx.AsyncClient) -> Iterator[None]:
    """Run a request on `client`; an httpx exception leaves as ArcaneTimeout or
    ArcaneUnreachable naming Arcane's URL or the client's read timeout."""
    try:
        yield
    except httpx.TimeoutException as exc:
        sent = not isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
        raise ArcaneTimeout(f"Arcane did not answer within {client.timeout.read:g}s", None, sent=sent) from None
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.NetworkError) as exc:
        sent = not isinstance(exc, httpx.ConnectError)
        raise ArcaneUnreachable(f"Arcane at {arcane_url(client)} could not be reached ({type(exc).__name__}: {exc or 'connection failed'})",
                                "Check that Arcane is running and ARCANE_URL is right, then retry.", sent=sent) from None
    except httpx.HTTPError as exc:
        raise ArcaneUnreachable(f"the request to Arcane failed ({type(exc).__name__})", "Retry; if it persists, check ARCANE_URL and the network.",
                                sent=True) from None


async def body_chunks(resp: httpx.Response) -> AsyncIterator[bytes]:
    """The answer's bytes as they arrive; a read timeout or a broken connection while
    reading leaves as ArcaneTimeout or ArcaneUnreachable (the request was sent)."""
    try:
        async for chunk in resp.aiter_bytes():
            yield chunk
    except httpx.TimeoutException:
        raise ArcaneTimeout("Arcane stopped sending the answer before it was complete (read timeout)", None, sent=True) from None
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.NetworkError) as exc:
        raise ArcaneUnreachable(f"the connection to Arcane broke while reading the answer ({type(exc).__name__})",
                                "Retry; if the action changes state, check the current state first.", sent=True) from None


def fetch(url: str, timeout: float, max_bytes: int) -> bytes:
    """GET a document (interp update-spec): no redirect followed, at most `max_bytes`;
    every failure, httpx's included, is a SpecSourceError with its code."""
    try:
        with httpx.Client(follow_redirects=False, timeout=timeout) as client, \
                client.stream("GET", url, headers={"Accept": "application/json"}) as resp:
            if resp.is_redirect:
                raise SpecSourceError(f"{url} answered {resp.status_code} redirecting to {resp.headers.get('location', '?')}; "
                                      "redirects are not followed, pass the final URL", code="redirect")
            if resp.status_code != 200:
                raise SpecSourceError(f"{url} answered HTTP {resp.status_code}", code="http_status")
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise SpecSourceError(f"{url} sent more than {max_bytes} bytes", code="too_large")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.TimeoutException:
        raise SpecSourceError(f"{url} did not answer within {timeout:g}s", code="timeout") from None
    except httpx.HTTPError as exc:
        raise SpecSourceError(f"cannot fetch {url}: {exc}", code="unreachable") from None
