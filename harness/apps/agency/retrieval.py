"""How the Retriever ranks what memory holds: keyword overlap, behind an interface a vector search can replace.

A :class:`Ranker` orders :class:`Document` s by how well they answer a query (a list of terms). The reference ranker,
:class:`KeywordOverlap`, counts the query's terms a document shares (its text and its tags); a project plugs in its
own (an embedding search, say) by naming a class with the same ``rank`` method in the Retriever's options
(``producer: {python: harness.apps.agency.stages:retriever, ranker: mypkg.search:Embeddings}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

_WORD = re.compile(r"[a-z0-9][a-z0-9_+#.-]*")
STOPWORDS = frozenset(
    "a an and are as at be but by can do does for from has have how i if in into is it its make me my no not of on "
    "or our should so that the their them then there these this to up use was we what when which will with you "
    "your please create write add build run new".split())


def terms(text: str) -> list[str]:
    """The words of ``text`` worth matching: lower case, three letters or more, no stop words, in order, once each."""
    found = [w.strip(".-") for w in _WORD.findall(text.lower())]
    return list(dict.fromkeys(w for w in found if len(w) >= 3 and w not in STOPWORDS))


@dataclass(frozen=True)
class Document:
    """One thing memory holds: a lesson, a playbook or an example, as a ranker sees it."""

    id: str
    text: str
    tags: tuple[str, ...] = ()


class Ranker(Protocol):
    def rank(self, query: Sequence[str], documents: Sequence[Document], top: int) -> list[Document]:
        """The ``top`` documents that answer ``query`` best, best first; none that answers it not at all."""


class KeywordOverlap:
    """Documents ranked by the number of the query's terms they share (a tag counts twice), ties in their order."""

    def rank(self, query: Sequence[str], documents: Sequence[Document], top: int) -> list[Document]:
        wanted = {term.lower() for term in query}
        scored = []
        for index, document in enumerate(documents):
            words = set(terms(document.text))
            tags = {t.lower() for t in document.tags}
            score = len(wanted & words) + 2 * len(wanted & tags)
            if score:
                scored.append((-score, index, document))
        return [document for _, _, document in sorted(scored)[:top]]


def query_terms(parts: Iterable[str]) -> list[str]:
    """A query from phrases (sub-problems, knowledge areas, keywords, pattern names): their terms, once each."""
    return list(dict.fromkeys(term for part in parts for term in terms(part)))
