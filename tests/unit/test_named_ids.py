"""The entity ids entities_for_query looks up for the names a question may hold."""

from mempalace_pg.retrieval.entities import NAME_QUERY_WORDS, NAME_WORDS, named_ids


def test_runs_of_words_become_mempalace_entity_ids():
    ids = named_ids("What did Tomás Reyes's team decide about O'Brien's garden?")
    # MemPalace's ids: lower case, "_" for spaces, apostrophes dropped; a possessive tried without 's
    assert {"tomás_reyes", "tomás", "reyes_team", "obrien", "obriens", "garden"} <= set(ids)
    assert "garden?" not in ids and "tomás_reyes_team_decide_about" not in ids  # at most NAME_WORDS
    assert all(len(i.split("_")) <= NAME_WORDS for i in ids)


def test_nothing_to_look_up_without_text_and_only_the_first_words_of_a_long_one():
    assert named_ids(None) == [] and named_ids("") == [] and named_ids("?! ...") == []
    ids = named_ids(" ".join(f"w{i}" for i in range(NAME_QUERY_WORDS + 50)))
    assert f"w{NAME_QUERY_WORDS - 1}" in ids and f"w{NAME_QUERY_WORDS}" not in ids
