"""One metrics registry for both stages, rendered in the Prometheus text format."""

from __future__ import annotations

from collections.abc import Callable


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    if not names:
        return ""
    escaped = (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               for v in values)
    return "{" + ",".join(f'{n}="{v}"' for n, v in zip(names, escaped, strict=True)) + "}"


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

    def render(self) -> list[str]:
        """Prometheus text lines for this family."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        items = sorted(dict(self.values).items())
        if not items and not self.labels:
            items = [((), 0.0)]
        lines += [f"{self.name}{_labels(self.labels, k)} {v:g}" for k, v in items]
        return lines


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
