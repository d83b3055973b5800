"""The live status of the local commands: the library's INFO lines feed it, warnings still print, and
the library's logger is left as it was."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from cdc_lake.local.progress import LIBRARY_LOGGER, live_status


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=200), out


def test_library_steps_show_in_the_status_and_warnings_print_above_it():
    console, out = terminal()
    library = logging.getLogger(LIBRARY_LOGGER)
    before = (library.level, library.propagate, list(library.handlers))
    with live_status("applying 3 file(s)", console):
        logging.getLogger("cdc_lake.engine.replay").info("shop.orders: merging %d key(s) into shop_orders", 42)
        logging.getLogger("cdc_lake.engine.drain").warning("shop.items: left as it was")
    text = out.getvalue()
    assert "applying 3 file(s)" in text
    assert "shop.orders: merging 42 key(s) into shop_orders" in text
    assert "WARNING cdc_lake.engine.drain: shop.items: left as it was" in text
    assert (library.level, library.propagate, list(library.handlers)) == before


def test_nothing_changes_when_output_is_not_a_terminal(caplog):
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with caplog.at_level(logging.INFO, logger=LIBRARY_LOGGER), live_status("applying", console):
        logging.getLogger("cdc_lake.engine.replay").info("read and checked 5 change row(s)")
    assert out.getvalue() == ""
    assert "read and checked 5 change row(s)" in caplog.text
