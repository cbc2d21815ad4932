"""What every experiment family declares, and the checks its parameters share.

A family module (``memlab/chase.py`` ...) builds one :class:`Family`::

    FAMILY = Family(
        name="chase",
        params_type=ChaseParams,     # frozen dataclass validating itself
        core="chase",                # the C family (ML_FAMILY(chase) in csrc/chase.c)
        to_core=_to_core,            # params -> the C config dict
        unit="element",              # gives ns_per_element, cycles_per_element
        sweeps={"quick": quick_sweep, "fig3_10": fig3_10_sweep},
        figure=figure,               # Dataset -> its standard matplotlib figure
        caption="Time per element of a walk through a linked list ...",
        report_columns=("cycles_per_element",),
    )

and is listed in ``memlab/registry.py``. A family module imports only the
layers below it (``memlab.grid``, ``memlab.family``, ``memlab.measure``,
``memlab.dataset``, ``memlab.chart``, ``memlab.units``, ``memlab.machine``),
never the runner, the registry, the views or another family.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from memlab.dataset import check_param_name
from memlab.grid import Sweep
from memlab.measure import Measurement, measure

__all__ = [
    "Family",
    "check_bool",
    "check_choice",
    "check_int",
    "check_number",
    "coerce_params",
]


@dataclass(frozen=True)
class Family:
    """An experiment family: its parameters, its kernel, its sweeps and how it is shown.

    Measuring: ``params_type`` (a frozen dataclass validating itself),
    ``core`` (the C family's name) with ``to_core`` (params -> C config), or
    ``python_sample`` (a sample timed in Python); ``unit`` names the derived
    ``ns_per_<unit>``; ``derive`` adds metrics computed from a sample.
    Presenting: ``figure(dataset)`` draws the family's standard figure (a
    matplotlib Figure, from the kinds in :mod:`memlab.chart`; None: the
    generic one), ``caption`` says in a sentence or two how to read it (or,
    a function of the dataset, says it per sweep), and
    ``report_columns`` lists metrics worth a column of their own in the
    report's table (shown when present).
    """

    name: str
    params_type: type
    core: str | None = None
    to_core: Callable[[Any], Mapping[str, Any]] | None = None
    python_sample: Callable[[Any, float], Mapping[str, Any]] | None = None
    unit: str | None = None
    primary_metric: str | None = None
    derive: Callable[[Any, dict[str, float]], Mapping[str, float]] | None = None
    sweeps: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    description: str = ""
    default_repeat: int = 5
    default_warmup: int = 1
    default_target_seconds: float = 0.1
    figure: Callable[[Any], Any] | None = None
    caption: str | Callable[[Any], str] = ""
    report_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in self.param_names:
            try:
                check_param_name(name)
            except ValueError as error:
                raise ValueError(f"family {self.name!r}: {error}") from None

    @property
    def param_names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.params_type)]

    def caption_for(self, dataset: Any) -> str:
        """How to read this dataset's figure: ``caption``, or ``caption(dataset)`` when it is a function
        (a family whose sweeps draw different figures).

        >>> @dataclasses.dataclass(frozen=True)
        ... class NoParams:
        ...     pass
        >>> Family("f", NoParams, caption="Read it left to right.").caption_for(None)
        'Read it left to right.'
        """
        return self.caption(dataset) if callable(self.caption) else self.caption

    def params(self, params: Any = None, **overrides: Any) -> Any:
        """Coerce a dict, a params object or keywords into the params type."""
        return coerce_params(self.params_type, params, overrides)

    def run(
        self,
        params: Any = None,
        *,
        repeat: int | None = None,
        warmup: int | None = None,
        cpu: int | None = None,
        target_seconds: float | None = None,
        counters: bool = True,
        **overrides: Any,
    ) -> Measurement:
        """Measure one point; keywords not listed here are parameters."""
        checked = self.params(params, **overrides)
        param_dict = dataclasses.asdict(checked)
        config = None
        if self.core is not None:
            config = self.to_core(checked) if self.to_core else param_dict
        python_sample = None
        if self.python_sample is not None:
            sample_fn = self.python_sample

            def python_sample(target: float) -> Mapping[str, Any]:
                return sample_fn(checked, target)

        derive = None
        if self.derive is not None:
            derive_fn = self.derive

            def derive(_: Any, values: dict[str, float]) -> Mapping[str, float]:
                return derive_fn(checked, values)

        return measure(
            self.name,
            param_dict,
            core=self.core,
            config=config,
            python_sample=python_sample,
            unit=self.unit,
            primary_metric=self.primary_metric,
            derive=derive,
            repeat=self.default_repeat if repeat is None else repeat,
            warmup=self.default_warmup if warmup is None else warmup,
            cpu=cpu,
            target_seconds=self.default_target_seconds if target_seconds is None else target_seconds,
            counters=counters,
        )

    def sweep(self, name: str) -> Sweep | list[Sweep]:
        """The named sweep (a :class:`memlab.grid.Sweep`, or a list of them)."""
        try:
            factory = self.sweeps[name]
        except KeyError:
            known = ", ".join(sorted(self.sweeps)) or "none"
            raise ValueError(f"sweep={name!r} is not a sweep of {self.name} (known: {known})") from None
        return factory()


def coerce_params(params_type: type, params: Any, overrides: Mapping[str, Any]) -> Any:
    """Build params_type from None, a mapping, or an instance plus overrides."""
    if params is None:
        base: dict[str, Any] = {}
    elif isinstance(params, params_type):
        base = dataclasses.asdict(params)
    elif isinstance(params, Mapping):
        base = dict(params)
    else:
        raise ValueError(
            f"params={params!r} must be a {params_type.__name__}, a dict or None"
        )
    base.update(overrides)
    known = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(base) - known)
    if unknown:
        raise ValueError(
            f"unknown parameter {unknown[0]!r} for {params_type.__name__} "
            f"(known: {', '.join(sorted(known))})"
        )
    return params_type(**base)


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return value if it is an int within [minimum, maximum], else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name}={value!r} must be an integer")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value} is above the maximum {maximum}")
    return int(value)


def check_number(
    name: str, value: Any, minimum: float | None = None, maximum: float | None = None,
    *, exclusive_minimum: bool = False,
) -> float:
    """Return value as a float if it is a finite number in range, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}={value!r} must be a number")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{name}={value} must be finite")
    if minimum is not None:
        if exclusive_minimum and value <= minimum:
            raise ValueError(f"{name}={value:g} must be above {minimum:g}")
        if not exclusive_minimum and value < minimum:
            raise ValueError(f"{name}={value:g} is below the minimum {minimum:g}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value:g} is above the maximum {maximum:g}")
    return value


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """Return value if it is one of choices, else ValueError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return value if it is a bool (or 0/1), else ValueError."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name}={value!r} must be True or False")
