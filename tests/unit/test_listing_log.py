"""A run's listings kept (``ListingLog``) so that it can tell which files still wait without listing again
(``RecordedListings``): what a folder's newest covering listing showed, from where it is asked; only what was
never listed goes to the store, counted."""

from __future__ import annotations

from pathlib import Path

from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.runs.listings import ListingLog, RecordedListings

T = "dms/shop/items/"
OTHER = "dms/shop/tags/"


def land(root: Path, *keys: str) -> None:
    for key in keys:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text("I,1,one\n")


def keys(objects: list) -> list[str]:
    return [o.key for o in objects]


def test_a_recorded_listing_answers_what_it_covers_without_asking_the_store(tmp_path: Path) -> None:
    store = LocalFolderStore(tmp_path)
    land(tmp_path, T + "20250301-100000000.csv", T + "20250301-110000000.csv", T + "LOAD00000001.csv")
    listings = ListingLog(store)
    seen = [T + "20250301-100000000.csv", T + "20250301-110000000.csv", T + "LOAD00000001.csv"]
    assert keys(listings.list(T)) == seen
    land(tmp_path, T + "20250301-120000000.csv")  # lands after the run's listing
    recorded = RecordedListings(listings)
    before = store.listings

    assert keys(recorded.list(T)) == seen  # as the run saw it: the later file is not there
    assert keys(recorded.list(T, start_after=T + "20250301-100000000.csv")) == seen[1:]
    assert recorded.requests == 0 and store.listings == before


def test_a_newer_listing_that_starts_no_later_replaces_an_older_one(tmp_path: Path) -> None:
    store = LocalFolderStore(tmp_path)
    land(tmp_path, T + "20250301-100000000.csv")
    listings = ListingLog(store)
    listings.list(T, start_after=T + "20250301-09")
    land(tmp_path, T + "20250301-110000000.csv")
    listings.list(T)  # from the start: holds all the first did, and what landed since
    assert listings.newest(T) == (None, store.list(T))
    land(tmp_path, T + "20250301-120000000.csv")
    listings.list(T, start_after=T + "20250301-115")  # narrower: the whole listing is kept beside it
    recorded = RecordedListings(listings)
    assert keys(recorded.list(T, start_after=T + "20250301-115")) == [T + "20250301-120000000.csv"]
    assert keys(recorded.list(T)) == [T + "20250301-100000000.csv", T + "20250301-110000000.csv"]
    assert recorded.requests == 0


def test_what_was_never_listed_or_read_is_asked_of_the_store_and_counted(tmp_path: Path) -> None:
    store = LocalFolderStore(tmp_path)
    land(tmp_path, T + "20250301-100000000.csv", OTHER + "20250301-100000000.csv")
    listings = ListingLog(store)
    listings.list(T, start_after=T + "20250301-09")
    assert listings.read_head(T + "20250301-100000000.csv", 4) == b"I,1,"
    recorded = RecordedListings(listings)

    assert recorded.read_head(T + "20250301-100000000.csv", 4) == b"I,1,"  # read by the run
    assert recorded.requests == 0
    assert keys(recorded.list(T)) == [T + "20250301-100000000.csv"]  # the recorded one does not cover it
    assert keys(recorded.list(OTHER)) == [OTHER + "20250301-100000000.csv"]  # never listed
    assert recorded.read_head(OTHER + "20250301-100000000.csv", 4) == b"I,1,"
    assert recorded.requests == 3


def test_a_run_that_lists_a_folder_thousands_of_times_keeps_two_listings_and_no_head_it_passed(tmp_path: Path) -> None:
    """Scenario 5 of issue 69: a warm run lists each of its folders every round for a day, from a start that moves
    on; what it keeps grows with its tables, not its files."""
    store = LocalFolderStore(tmp_path)
    listings = ListingLog(store)
    land(tmp_path, T + "20250301-000000000.csv")
    listings.list(T)
    for minute in range(1, 600):
        name = f"{T}20250301-{minute // 60:02d}{minute % 60:02d}00000.csv"
        land(tmp_path, name)
        listings.read_head(name, 4)
        listings.list(T, start_after=name[:-8])  # the round after the file's batch lists from just before it
    assert len(listings._listings[T]) == 2  # the first, from the start, and the newest
    assert len(listings._heads) == 1  # the newest file's
    newest = f"{T}20250301-095900000.csv"
    recorded = RecordedListings(listings)
    assert keys(recorded.list(T, start_after=newest[:-8])) == [newest]
    assert len(recorded.list(T)) == 1  # the first listing, as the run saw it
    assert recorded.requests == 0
    assert recorded.read_head(T + "20250301-000100000.csv", 4) == b"I,1,"  # passed: asked of the store, counted
    assert recorded.requests == 1


def test_a_long_lived_runs_results_are_folded_into_counts_and_its_notices_kept() -> None:
    from cdc_lake.core.notices import Notice
    from cdc_lake.engine.replay import RunResult
    from cdc_lake.engine.runs.outcome import DrainResult

    outcome = DrainResult()
    notice = Notice("unknown-table", "dms/shop/gone/", "holds files of a table that is not in the configuration")
    for batch in range(5_000):
        applied = [f"{T}{batch:09d}.csv"] if batch % 2 else []
        outcome.results.append(RunResult("shop.items", applied_files=applied, notices=[notice] if batch == 7 else []))
        outcome.fold(keep=100)
    assert len(outcome.results) == 100
    assert (outcome.commit_count, outcome.applied_count) == (2_500, 2_500)
    assert outcome.notices == [notice] and not outcome.already_applied
    assert outcome.applied_files[-1] == f"{T}000004999.csv"
