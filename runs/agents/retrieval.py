"""Retrieving paper paragraphs and code for a masked function, for the agentless harness.

The corpus is cut into chunks: paragraphs of paper.md (each titled by its section heading), and
the functions, methods, class headers and module-level code of the Python files under code/
(the masked stubs themselves left out: they are the question, not the answer). A query (the
function's name, docstring and file) is matched against them in one of two ways:

- `LexicalRetriever` (the default): BM25 over word tokens, with identifiers split at `_` and
  camelCase and a light suffix stemmer, so `weighted_mean` meets "weighted means" in the paper.
  Pure Python and numpy; no model, no cost.
- `EmbeddingRetriever`: cosine similarity of embeddings from an `Embedder`, such as
  `OpenAIEmbedder` (the embeddings endpoint of OpenAI or any OpenAI-compatible server). This is
  what the paper's agentless harness used. Chunks are embedded once, on the first search.

Both return a `Retrieval`: the paper hits and code hits, plus what the search cost.
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from runs.benchmark import python_ast
from runs.benchmark.workspace import CODE_DIR, EXCLUDED_DIRS

from .llm import ModelError, Usage, pricing
from .llm._errors import translate
from .llm.base import OPENAI_API_KEY_ENV, OPENAI_BASE_URL_ENV, resolve_endpoint

__all__ = [
    "Chunk",
    "Embedder",
    "EmbeddingRetriever",
    "Embeddings",
    "Hit",
    "LexicalRetriever",
    "OpenAIEmbedder",
    "Retrieval",
    "Retriever",
    "code_chunks",
    "embedder_from_name",
    "function_query",
    "paper_chunks",
    "tokenize",
]

# Code files larger than this are not indexed (generated or data-like files).
MAX_INDEXED_FILE_BYTES = 300_000
# A chunk longer than this is cut for indexing and display (a very long function, a huge class).
MAX_CHUNK_CHARS = 6_000
# Paper paragraphs shorter than this (a lone "**Least squares.**" line) join the next one.
MIN_PARAGRAPH_CHARS = 80

# USD per million input tokens of embedding models, from platform.openai.com/docs/pricing. The LLM
# price table (and LLM_PRICES_FILE) is consulted first, so users can price their own models there.
EMBEDDING_PRICES = {
    "text-embedding-3-small": 0.02,
    "text-embedding-3-large": 0.13,
    "text-embedding-ada-002": 0.10,
}


@dataclass(frozen=True)
class Chunk:
    """A piece of the paper or the code. `source` is its workspace path, `line` its first line there."""

    kind: str  # "paper" or "code"
    source: str
    title: str
    text: str
    line: int


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float


@dataclass
class Retrieval:
    """What one search found, and its cost (cost None: the embedding model's price is unknown)."""

    paper: list[Hit] = field(default_factory=list)
    code: list[Hit] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    note: str = ""


class Retriever(Protocol):
    """Finds the chunks most relevant to a query: `paper_k` paper hits and `code_k` code hits."""

    method: str

    def search(self, query: str, *, paper_k: int, code_k: int) -> Retrieval: ...


# --- chunking ------------------------------------------------------------------------------------


def paper_chunks(text: str, *, source: str = "paper.md") -> list[Chunk]:
    """The paper's paragraphs, each titled with the heading of its section.

    Paragraphs are separated by blank lines, except inside a `$$ ... $$` display equation. Headings
    are titles, not chunks; a very short paragraph is joined to the next one.
    """
    chunks: list[Chunk] = []
    heading = ""
    pending: list[str] = []
    pending_line = 0
    in_math = False

    def flush(start_next: int) -> None:
        nonlocal pending, pending_line
        paragraph = "\n".join(pending).strip()
        if paragraph:
            chunks.append(Chunk("paper", source, heading, paragraph[:MAX_CHUNK_CHARS], pending_line))
        pending, pending_line = [], start_next

    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not in_math and stripped.startswith("#"):
            flush(number + 1)
            heading = stripped.lstrip("#").strip()
            continue
        if stripped.count("$$") % 2:
            in_math = not in_math
        if not stripped and not in_math:
            if len("\n".join(pending).strip()) >= MIN_PARAGRAPH_CHARS:
                flush(number + 1)
            elif pending:
                pending.append("")  # too short to stand alone: joins the next paragraph
            continue
        if not pending:
            pending_line = number
        pending.append(line)
    flush(0)
    return chunks


def _segment(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start - 1 : end]).rstrip()[:MAX_CHUNK_CHARS]


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([d.lineno for d in decorators] + [node.lineno])


def _python_chunks(source: str, path: str, exclude: set[str]) -> list[Chunk]:
    """Chunks of one Python file: module-level code, functions, class headers and methods."""
    try:
        tree = python_ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    chunks: list[Chunk] = []
    module_lines: list[str] = []
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for node in tree.body:
        start, end = _first_line(node), node.end_lineno or node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name not in exclude:
                chunks.append(Chunk("code", path, node.name, _segment(lines, start, end), start))
        elif isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, definitions)]
            header_end = (_first_line(methods[0]) - 1) if methods else end
            chunks.append(Chunk("code", path, f"class {node.name}", _segment(lines, start, header_end), start))
            for method in methods:
                name = f"{node.name}.{method.name}"
                if name in exclude:
                    continue
                first, last = _first_line(method), method.end_lineno or method.lineno
                # A method alone does not say which class it belongs to; its reader needs that.
                text = f"class {node.name}:\n    ...\n{_segment(lines, first, last)}"
                chunks.append(Chunk("code", path, name, text[:MAX_CHUNK_CHARS], first))
        else:
            module_lines.append(_segment(lines, start, end))
    if module_lines:
        chunks.insert(0, Chunk("code", path, "module-level code", "\n".join(module_lines)[:MAX_CHUNK_CHARS], 1))
    return chunks


def code_chunks(workspace: Path, *, exclude: Iterable[tuple[str, str]] = ()) -> list[Chunk]:
    """Chunks of every Python file under the workspace's code/, skipping the (file, qualified name)
    pairs in `exclude` (the masked stubs)."""
    excluded: dict[str, set[str]] = {}
    for path, name in exclude:
        excluded.setdefault(path, set()).add(name)
    root = Path(workspace)
    chunks: list[Chunk] = []
    for directory, subdirs, files in os.walk(root / CODE_DIR):
        subdirs[:] = sorted(d for d in subdirs if d not in EXCLUDED_DIRS)
        for name in sorted(files):
            file = Path(directory) / name
            if not name.endswith(".py") or file.is_symlink() or file.stat().st_size > MAX_INDEXED_FILE_BYTES:
                continue
            relative = file.relative_to(root).as_posix()
            source = file.read_text(encoding="utf-8", errors="replace")
            chunks.extend(_python_chunks(source, relative, excluded.get(relative, set())))
    return chunks


def function_query(*, name: str, docstring: str, file: str) -> str:
    """The query for a masked function: its qualified name, its file and its docstring."""
    return f"{name}\n{file}\n{docstring}".strip()


# --- lexical retrieval ---------------------------------------------------------------------------

_STOPWORDS = frozenset(
    # English function words
    ["a", "an", "and", "are", "as", "at", "be", "by", "each", "for", "from", "has", "have", "in",
     "into", "is", "it", "its", "no", "not", "of", "on", "or", "our", "over", "per", "than", "that",
     "the", "their", "then", "these", "this", "those", "to", "under", "via", "was", "we", "were",
     "which", "will", "with"]
    # Python keywords and docstring field names, in every code chunk and query alike
    + ["class", "def", "elif", "else", "false", "if", "import", "none", "param", "return", "returns",
       "self", "true", "while"]
    # LaTeX commands, in every equation of the paper
    + ["cdot", "frac", "left", "mathbb", "mathrm", "qquad", "quad", "right", "text"]
)  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9]+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _stem(word: str) -> str:
    """A light suffix stemmer: plural, -ed, -ing, final -e. Enough to meet weighted/weights/weight."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # clipping -> clipp -> clip
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-case stemmed word tokens; identifiers are split at `_` and camelCase humps too."""
    tokens = []
    for word in _WORD.findall(text):
        parts = _PART.findall(word) or [word]
        for part in parts:
            part = part.lower()
            if len(part) > 1 and part not in _STOPWORDS:
                tokens.append(_stem(part))
    return tokens


class BM25:
    """Okapi BM25 scores of tokenised documents for a tokenised query."""

    def __init__(self, documents: list[list[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.counts = [Counter(document) for document in documents]
        self.lengths = np.array([len(document) for document in documents], dtype=float)
        self.average = float(self.lengths.mean()) if documents and self.lengths.sum() else 1.0
        frequency = Counter(term for counts in self.counts for term in counts)
        total = len(documents)
        self.idf = {term: math.log(1 + (total - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def scores(self, query: list[str]) -> np.ndarray:
        scores = np.zeros(len(self.counts))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / self.average)
        for term in set(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([counts.get(term, 0) for counts in self.counts], dtype=float)
            scores += idf * tf * (self.k1 + 1) / (tf + norm)
        return scores


def _top(chunks: list[Chunk], scores: np.ndarray, k: int) -> list[Hit]:
    # Stable order for ties (document order), and nothing that matched no term at all.
    order = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
    return [Hit(chunks[i], float(scores[i])) for i in order[:k] if scores[i] > 0]


class LexicalRetriever:
    """BM25 over the chunks' titles, paths and text; one index for the paper, one for the code."""

    method = "bm25"

    def __init__(self, chunks: list[Chunk]) -> None:
        self.paper = [c for c in chunks if c.kind == "paper"]
        self.code = [c for c in chunks if c.kind == "code"]
        self._paper_index = BM25([tokenize(f"{c.title}\n{c.text}") for c in self.paper])
        self._code_index = BM25([tokenize(f"{c.source}\n{c.title}\n{c.text}") for c in self.code])

    def search(self, query: str, *, paper_k: int, code_k: int) -> Retrieval:
        tokens = tokenize(query)
        return Retrieval(
            paper=_top(self.paper, self._paper_index.scores(tokens), paper_k),
            code=_top(self.code, self._code_index.scores(tokens), code_k),
        )


# --- embeddings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Embeddings:
    """Vectors (one row per input text) and what computing them cost (None: price unknown)."""

    vectors: np.ndarray
    usage: Usage
    cost: float | None


class Embedder(Protocol):
    """A text embedding model. `name` is its spec (see `embedder_from_name`)."""

    name: str

    def embed(self, texts: list[str]) -> Embeddings:
        """One vector per text, in order. Raises ModelError when the provider fails."""
        ...


def embedding_cost(model: str, tokens: int) -> float | None:
    """USD for `tokens` input tokens of an embedding model, or None when its price is unknown."""
    known = pricing.cost(model, Usage(tokens, 0))
    if known is not None:
        return known
    price = EMBEDDING_PRICES.get(model)
    return None if price is None else tokens * price / 1_000_000


class OpenAIEmbedder:
    """Embeddings from the OpenAI embeddings API, or any OpenAI-compatible server (vLLM, Ollama).

    Keys and base URLs work as for `OpenAIChatModel`: `api_key` defaults to $OPENAI_API_KEY,
    `base_url` to $OPENAI_BASE_URL; a custom base URL needs no key. Texts are sent in batches of
    `batch_size`, each cut to `max_input_chars` (the models accept about 8k tokens per input).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 120,
        batch_size: int = 64,
        max_input_chars: int = 16_000,
    ) -> None:
        import openai  # here, not at the top: the SDK is slow to import, and most processes never embed

        self.model = model
        self.base_url, api_key = resolve_endpoint(
            api_key=api_key, base_url=base_url, api_key_env=OPENAI_API_KEY_ENV, base_url_env=OPENAI_BASE_URL_ENV, provider="openai"
        )
        self.max_retries = max_retries
        self.batch_size = batch_size
        self.max_input_chars = max_input_chars
        self.name = f"openai-compatible:{model}@{self.base_url}" if self.base_url else f"openai:{model}"
        self._client = openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=max_retries, timeout=timeout)

    def embed(self, texts: list[str]) -> Embeddings:
        import openai  # for its exception classes; imported already by __init__

        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), self.batch_size):
            # The API refuses empty strings.
            batch = [text[: self.max_input_chars] or " " for text in texts[start : start + self.batch_size]]
            try:
                # Floats, not the SDK's default base64: not every compatible server speaks base64.
                response = self._client.embeddings.create(model=self.model, input=batch, encoding_format="float")
            except openai.OpenAIError as error:
                raise translate(error, sdk=openai, provider=self.name, env_var=OPENAI_API_KEY_ENV, max_retries=self.max_retries) from error
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise ModelError(f"asked for {len(batch)} embeddings, got {len(data)}", retryable=False, provider=self.name)
            vectors.extend(item.embedding for item in data)
            tokens += response.usage.prompt_tokens if response.usage is not None else 0
        matrix = np.array(vectors, dtype=float).reshape(len(vectors), -1)
        return Embeddings(matrix, Usage(tokens, 0), embedding_cost(self.model, tokens))

    def close(self) -> None:
        self._client.close()


_WITH_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def embedder_from_name(spec: str, **kwargs: Any) -> OpenAIEmbedder:
    """The embedder a spec names: `openai:<model>` or `openai-compatible:<model>@<base_url>`.

    Raises ValueError for a malformed spec or a provider without an embeddings API (Anthropic has
    none), MissingAPIKey when OpenAI is named without a key.
    """
    provider, sep, model = spec.strip().partition(":")
    if not sep or not model or provider not in ("openai", "openai-compatible"):
        raise ValueError(
            f"embedding model spec {spec!r} must be openai:<model> or openai-compatible:<model>@<base_url> "
            "(e.g. openai:text-embedding-3-small)"
        )
    match = _WITH_URL.match(model)
    if match:
        model, kwargs["base_url"] = match["model"], match["url"]
    if provider == "openai-compatible" and not kwargs.get("base_url"):
        raise ValueError(f"{spec!r}: openai-compatible needs a base URL: openai-compatible:<model>@<base_url>")
    return OpenAIEmbedder(model, **kwargs)


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class EmbeddingRetriever:
    """Cosine similarity between the query's embedding and the chunks' (embedded on first use)."""

    def __init__(self, chunks: list[Chunk], embedder: Embedder) -> None:
        self.chunks = chunks
        self.embedder = embedder
        self.method = f"embeddings:{embedder.name}"
        self._vectors: np.ndarray | None = None

    def _text(self, chunk: Chunk) -> str:
        where = f"{chunk.source}: {chunk.title}" if chunk.kind == "code" else chunk.title
        return f"{where}\n{chunk.text}"

    def search(self, query: str, *, paper_k: int, code_k: int) -> Retrieval:
        note = ""
        texts = [query]
        if self._vectors is None:
            texts += [self._text(chunk) for chunk in self.chunks]
            note = f"embedded {len(self.chunks)} chunks"
        embedded = self.embedder.embed(texts)
        vectors = _normalised(embedded.vectors)
        if self._vectors is None:
            self._vectors = vectors[1:]
        similarity = self._vectors @ vectors[0] if len(self.chunks) else np.zeros(0)
        found = Retrieval(usage=embedded.usage, cost=embedded.cost, note=note)
        for kind, k in (("paper", paper_k), ("code", code_k)):
            indices = [i for i, chunk in enumerate(self.chunks) if chunk.kind == kind]
            order = sorted(indices, key=lambda i: (-similarity[i], i))[:k]
            setattr(found, kind, [Hit(self.chunks[i], float(similarity[i])) for i in order])
        return found
