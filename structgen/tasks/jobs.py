"""Many generations as one batch: each task is a *job* that asks for decodings and turns their
outcomes into a result; :func:`run_jobs` decodes what every job asks for together.

A job is a Python generator: it compiles and prompts, then ``yield``\\ s a :class:`Decode`
(matcher, prompt ids, its options) and receives ``(token ids, finish, stats)`` back, or has the
row's error (:class:`~structgen.IncompleteGenerationError`, a dead end) raised at that
``yield``; it may ask again (a SQL retry) and finally returns its result. :func:`run_jobs`
starts every job, decodes all pending requests in one batch
(:func:`structgen.decoding.loop.decode_rows`), hands each outcome back, and repeats until every
job has returned. An exception a job raises becomes that job's entry in the result list: one
row's failure never aborts the others. A single call is a batch of one (:func:`run_job`,
which raises).

Example
-------
>>> from structgen.tasks.jobs import Decode, run_jobs                     # doctest: +SKIP
>>> def yes_or_no(ctx, question):                                        # doctest: +SKIP
...     tokens, finish, stats = yield Decode(ctx.compiler.regex("yes|no").matcher(),
...                                          ctx.chat_ids(question), DecodeConfig())
...     return ctx.text_of(tokens)
>>> run_jobs(ctx, [yes_or_no(ctx, "Is water wet?"), yes_or_no(ctx, "Is fire cold?")])  # doctest: +SKIP
['yes', 'no']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Generator, Sequence, TypeVar

from structgen.decoding.config import DecodeConfig
from structgen.decoding.loop import Finish, RowRequest
from structgen.decoding.stats import GenerationStats
from structgen.engine.matcher import Matcher
from structgen.tasks.reasoning import split_thinking, with_thinking

if TYPE_CHECKING:
    from structgen.tasks.context import ModelContext

__all__ = ["Decode", "Job", "Listener", "Retry", "Thinking", "run_job", "run_jobs"]

R = TypeVar("R")


@dataclass
class Decode:
    """One decoding a job asks for (see :class:`structgen.decoding.loop.RowRequest`)."""

    matcher: Matcher
    prompt_ids: Sequence[int]
    config: DecodeConfig
    banned_first: Collection[int] = ()
    stop: Callable[[list[int]], bool] | None = None
    #: for a stream: the output tokens before this decoding's own (a retry resumed past them)
    output_prefix: Sequence[int] = ()
    #: for a stream: why the job's previous decoding was refused (this one replaces it)
    retry_reason: str = ""


@dataclass(frozen=True)
class Retry:
    """In a stream: the text streamed so far was refused and decoding starts again; what
    follows is the new attempt's text from its start.

    Attributes
    ----------
    attempt
        The attempt that starts now (1 is the first retry).
    error
        Why the previous attempt was refused (e.g. SQLite's error for the query).
    """

    attempt: int
    error: str


@dataclass(frozen=True)
class Thinking:
    """For a stream: this row thinks first, between these markers (``opened``: the prompt
    already wrote the start marker), so its text is labelled reasoning up to the end marker."""

    start: str
    end: str
    opened: bool


#: Told of a job's progress while it decodes: ``(job index, new token ids)``, or ``(job index,
#: Retry)`` when a job asks for another decoding of the same output.
Listener = Callable[[int, "list[int] | Retry | Thinking"], None]


#: A task's generator: yields decodings, receives (token ids, finish, stats), returns a result.
Job = Generator[Decode, "tuple[list[int], Finish, GenerationStats]", R]


def run_job(context: "ModelContext", job: "Job[R]", listener: Listener | None = None) -> R:
    """Run one job; its exception is raised."""
    (result,) = run_jobs(context, [job], listener)
    if isinstance(result, Exception):
        raise result
    return result


def run_jobs(context: "ModelContext", jobs: Sequence["Job[Any]"], listener: Listener | None = None) -> list[Any]:
    """Run ``jobs`` together: the result of each, in order, or the exception it raised.

    Each round decodes every pending request in one batch per drafting setup (requests whose
    ``speculate``, ``max_draft`` and ``acceptance_prior`` agree share a batch; their budgets
    and sampling options stay their own). ``listener`` hears each job's tokens as they are
    accepted, and a :class:`Retry` when a job decodes its output again.
    """
    results: list[Any] = [None] * len(jobs)
    waiting: dict[int, Decode] = {}
    asked = [0] * len(jobs)

    def on_tokens(i: int, request: Decode) -> "Callable[[list[int]], None] | None":
        if listener is None:
            return None
        asked[i] += 1
        if asked[i] > 1:
            listener(i, Retry(asked[i] - 1, request.retry_reason))
        if request.output_prefix:
            listener(i, list(request.output_prefix))
        return lambda tokens: listener(i, tokens)

    def step(i: int, outcome: Any = None, error: BaseException | None = None) -> None:
        try:
            if error is not None:
                request = jobs[i].throw(error)
            elif outcome is None:
                request = next(jobs[i])
            else:
                request = jobs[i].send(outcome)
        except StopIteration as stop:
            results[i] = stop.value
        except Exception as err:  # noqa: BLE001 -- the row's failure is its result, the others go on
            results[i] = err
        else:
            waiting[i] = request

    thinking: dict[int, tuple[bytes, bytes, bool, Any]] = {}  # reasoning markers of the rows that think
    thoughts: dict[int, tuple[str, int]] = {}
    for i in range(len(jobs)):
        step(i)
    while waiting:
        for i, request in list(waiting.items()):
            if request.config.reasoning is not False:
                try:
                    waiting[i], thinking[i] = with_thinking(context, request)
                except Exception as err:  # noqa: BLE001 -- handed to the job, as a decoding error is
                    del waiting[i]
                    step(i, error=err)
                    continue
                if listener is not None:
                    start, end, opened, _ = thinking[i]
                    listener(i, Thinking(start.decode(), end.decode(), opened))
        rounds: dict[tuple[Any, ...], list[tuple[int, Decode]]] = {}
        for i, request in waiting.items():
            config = request.config
            rounds.setdefault((config.speculate, config.max_draft, config.acceptance_prior), []).append((i, request))
        waiting = {}
        for batch in rounds.values():
            fits = []
            for i, request in batch:
                try:
                    context.check_fits(request.prompt_ids, request.config)
                except Exception as err:  # noqa: BLE001 -- handed to the job, which may handle it
                    step(i, error=err)
                else:
                    fits.append((i, request))
            if not fits:
                continue
            outcomes = context.decode_batch(
                [RowRequest(r.matcher, r.prompt_ids, r.banned_first, r.stop, r.config, on_tokens(i, r))
                 for i, r in fits],
                fits[0][1].config)
            for (i, request), outcome in zip(fits, outcomes):
                if outcome.error is not None:
                    step(i, error=outcome.error)
                elif i in thinking:
                    thought, answer = split_thinking(context, outcome.tokens, thinking.pop(i))
                    thoughts[i] = (thought, request.matcher.thinking_tokens())
                    step(i, (answer, outcome.finish, outcome.stats))
                else:
                    step(i, (outcome.tokens, outcome.finish, outcome.stats))
    for i, (thought, count) in thoughts.items():
        if hasattr(results[i], "reasoning"):
            results[i].reasoning, results[i].reasoning_tokens = thought, count
    return results
