"""A real headless browser for the run pages: Playwright driving Debian's Chromium.

No browser is ever downloaded: `.ci/run` installs the `chromium` package, and Playwright
(its bundled driver only) launches that executable. Without it the tests are skipped, or
fail when BATON_REQUIRE_BROWSER=1 (CI sets it).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM = Path(os.environ.get("BATON_TEST_CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    if not CHROMIUM.is_file():
        message = f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
        if os.environ.get("BATON_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


class Lines:
    """The lines a subprocess writes, awaited by pattern with a deadline (never polled)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.seen: list[str] = []
        self._changed = asyncio.Condition()
        self._closed = False
        self._task = asyncio.create_task(self._pump(stream))

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            async with self._changed:
                self.seen.append(line.decode("utf-8", errors="replace").rstrip("\n"))
                self._changed.notify_all()
        async with self._changed:
            self._closed = True
            self._changed.notify_all()

    async def expect(
        self, pattern: str, *, after: int = 0, timeout: float = 30.0
    ) -> tuple[re.Match[str], int]:
        """The first line from index `after` matching `pattern`, and the index after it."""
        regex = re.compile(pattern)

        def found() -> tuple[re.Match[str], int] | None:
            for i in range(after, len(self.seen)):
                match = regex.search(self.seen[i])
                if match:
                    return match, i + 1
            return None

        async with self._changed:
            done = lambda: found() is not None or self._closed  # noqa: E731
            await asyncio.wait_for(self._changed.wait_for(done), timeout)
        hit = found()
        if hit is None:
            raise AssertionError(f"no line matched {pattern!r}:\n" + "\n".join(self.seen[-40:]))
        return hit
