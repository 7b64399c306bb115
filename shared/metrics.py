"""One metrics registry for both stages, rendered in the Prometheus text format."""

from __future__ import annotations

from collections.abc import Callable


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    if not names:
        return ""
    escaped = (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               for v in values)
    return "{" + ",".join(f'{n}="{v}"' for n, v in zip(names, escaped, strict=True)) + "}"


def sample(value: float) -> str:
    """A sample value in full: a whole number as one, else the shortest exact form (a
    6-digit form would turn a unix time or a counter past a million into steps)."""
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


class Metric:
    """A counter or gauge family with optional labels."""

    def __init__(self, name: str, help_text: str, kind: str, labels: tuple[str, ...]) -> None:
        self.name, self.help, self.kind, self.labels = name, help_text, kind, labels
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        """Add to the value (counters only go up)."""
        if amount < 0 and self.kind == "counter":
            raise ValueError(f"counter {self.name} cannot decrease")
        # No lock: updates come from one thread (the agent loop and the producer callbacks
        # it serves); the scraping thread copies the dict under the GIL.
        values = self.values
        values[labels] = values.get(labels, 0.0) + amount

    def set(self, value: float, *labels: str) -> None:
        """Set a gauge."""
        self.values[labels] = value

    def get(self, *labels: str) -> float:
        """The current value (0 when never set)."""
        return self.values.get(labels, 0.0)

    def remove(self, *labels: str) -> None:
        """Drop one label set's series (a host gone for good), so it stops being exported."""
        self.values.pop(labels, None)

    def render(self) -> list[str]:
        """Prometheus text lines for this family."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        items = sorted(dict(self.values).items())
        if not items and not self.labels:
            items = [((), 0.0)]
        lines += [f"{self.name}{_labels(self.labels, k)} {sample(v)}" for k, v in items]
        return lines


class Histogram(Metric):
    """A histogram family: observations counted into fixed buckets (upper bounds), with
    their sum, per label set."""

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...],
                 labels: tuple[str, ...]) -> None:
        super().__init__(name, help_text, "histogram", labels)
        self.buckets = buckets
        self.counts: dict[tuple[str, ...], list[int]] = {}  # per bucket, then +Inf
        self.sums: dict[tuple[str, ...], float] = {}

    def add(self, counts: list[int], total: float, *labels: str) -> None:
        """Add observations already counted per bucket (len(buckets) + 1 counts, the last
        for +Inf) with their sum."""
        if len(counts) != len(self.buckets) + 1:
            raise ValueError(f"{self.name}: {len(counts)} counts for "
                             f"{len(self.buckets) + 1} buckets")
        mine = self.counts.setdefault(labels, [0] * len(counts))
        for i, n in enumerate(counts):
            mine[i] += n
        self.sums[labels] = self.sums.get(labels, 0.0) + total

    def render(self) -> list[str]:
        """Prometheus text lines: cumulative buckets, sum and count per label set."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for labels, counts in sorted(dict(self.counts).items()):
            running = 0
            for bound, n in zip((*self.buckets, float("inf")), counts, strict=True):
                running += n
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                lines.append(f"{self.name}_bucket"
                             f"{_labels((*self.labels, 'le'), (*labels, le))} {running}")
            lines.append(f"{self.name}_sum{_labels(self.labels, labels)} "
                         f"{sample(self.sums.get(labels, 0.0))}")
            lines.append(f"{self.name}_count{_labels(self.labels, labels)} {running}")
        return lines


def bucket_of(buckets: tuple[float, ...], value: float) -> int:
    """The index of the first bucket whose upper bound holds `value` (len: +Inf)."""
    for i, bound in enumerate(buckets):
        if value <= bound:
            return i
    return len(buckets)


class Registry:
    """Named metric families plus gauges computed when scraped."""

    def __init__(self) -> None:
        self.metrics: dict[str, Metric] = {}
        self.collectors: list[Callable[[], None]] = []

    def _get(self, name: str, help_text: str, kind: str, labels: tuple[str, ...]) -> Metric:
        metric = self.metrics.get(name)
        if metric is None:
            metric = self.metrics[name] = Metric(name, help_text, kind, labels)
        return metric

    def counter(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Metric:
        """A counter family (created on first use)."""
        return self._get(name, help_text, "counter", labels)

    def gauge(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Metric:
        """A gauge family (created on first use)."""
        return self._get(name, help_text, "gauge", labels)

    def histogram(self, name: str, help_text: str, buckets: tuple[float, ...],
                  labels: tuple[str, ...] = ()) -> Histogram:
        """A histogram family (created on first use)."""
        metric = self.metrics.get(name)
        if metric is None:
            metric = self.metrics[name] = Histogram(name, help_text, buckets, labels)
        assert isinstance(metric, Histogram), name
        return metric

    def on_scrape(self, collect: Callable[[], None]) -> None:
        """Run `collect` (which sets gauges) before each rendering."""
        self.collectors.append(collect)

    def render(self) -> str:
        """The whole registry as Prometheus exposition text."""
        for collect in self.collectors:
            collect()
        lines: list[str] = []
        for name in sorted(self.metrics):
            lines += self.metrics[name].render()
        return "\n".join(lines) + "\n"
