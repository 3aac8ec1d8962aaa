"""The console's pages that read and change the memory, on PostgreSQL: the same test
functions as test_console.py, collected here with the other backend."""

from __future__ import annotations

import pytest

from tests.conftest import both_backends
from tests.ui.test_console import (  # noqa: F401 - collected here as tests
    test_a_post_without_the_csrf_token_is_a_403_and_writes_nothing,
    test_a_second_subject_sees_none_of_the_first_subjects_facts,
    test_overview_shows_counts_and_lists,
    test_path_tags_are_set_and_removed_and_refusals_shown,
    test_payloads_render_as_text_on_every_page,
    test_policies_page_lists_adds_removes_and_sees_as,
    test_recall_supersede_and_delete_from_the_fact_page,
    test_search_shows_the_three_modes_with_scores,
    test_tree_shows_children_tags_with_origin_and_pages_of_facts,
    test_viewing_a_fact_is_a_peek_and_draws_its_curve,
)

backend = pytest.fixture(scope="module", params=["postgresql"])(both_backends)
