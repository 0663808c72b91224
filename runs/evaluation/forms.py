"""The site's run form (/runs/new/): run_eval's options as form fields, checked by the command's own
check (runs.evaluation.services.run_options_problems), each problem shown at its field.

The page never asks for an API key: the workers call a model's provider with the key and endpoint
of their own environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENAI_BASE_URL...). For the same
reason a model spec here may not name an endpoint (`openai:gpt-4o@https://...`): the workers would
send their key there.
"""
from __future__ import annotations

import json

from django import forms
from django.conf import settings

from runs.agents import AGENTS
from runs.agents.llm import PROVIDERS
from runs.agents.llm.pricing import price_for
from runs.agents.react import HISTORY_STRATEGIES
from runs.benchmark.sampling import DEFAULT_CAP
from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context
from runs.evaluation.services import EACH_WORKERS_BACKEND, run_options_problems
from runs.models import Suite
from runs.suites.selectors import suite_get
from sandbox import BACKENDS

DESCRIPTION_MAX_CHARS = 2000
AGENT_CONFIG_MAX_CHARS = 5000


def parse_int_list(value: str) -> list[int]:
    """`"1, 2"` -> [1, 2] (run_eval --n's syntax); ValueError naming what is not an integer."""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    numbers = []
    for part in parts:
        try:
            numbers.append(int(part))
        except ValueError:
            raise ValueError(f"{part!r} is not an integer: give comma-separated integers, e.g. 1,2") from None
    return numbers


class RunStartForm(forms.Form):
    suite = forms.ChoiceField(help_text="The suite whose samples the run attempts.")
    agent = forms.ChoiceField(help_text="react and agentless call a model; gold, noop and mutant are baselines without one.")
    model = forms.CharField(
        required=False, max_length=500,
        help_text="A model spec, provider:model, e.g. openai:gpt-4o or anthropic:claude-3-5-sonnet-20241022; blank for the "
        "baselines. The workers call it with the API key of their own environment: no key is asked for here.",
    )
    n = forms.CharField(initial="1", max_length=200, label="n", help_text="Numbers of masked functions, comma-separated, e.g. 1,2.")
    k = forms.IntegerField(initial=1, label="k", help_text="Attempts per sample (pass@k).")
    seed = forms.IntegerField(initial=0, help_text="Seed of the sample draw.")
    cap = forms.IntegerField(initial=DEFAULT_CAP, label="Sample cap", help_text="At most this many samples per paper and n.")
    context = forms.ChoiceField(choices=[(c, c) for c in CONTEXT_CONDITIONS], initial=Context.FULL, help_text="Paper context.")
    max_steps = forms.IntegerField(initial=50, label="Max steps", help_text="Steps per attempt.")
    max_seconds = forms.FloatField(initial=1800.0, label="Max seconds", help_text="Seconds per attempt.")
    max_cost = forms.FloatField(initial=1.0, label="Max cost (USD)", help_text="USD per attempt: the agent stops there.")
    history = forms.ChoiceField(
        required=False, choices=[("", "the agent's default"), *((h, h) for h in HISTORY_STRATEGIES)],
        help_text="ReAct's history of earlier steps.",
    )
    window = forms.IntegerField(required=False, help_text="ReAct's window k (window and summary histories).")
    agent_config = forms.CharField(
        required=False, max_length=AGENT_CONFIG_MAX_CHARS, label="More agent settings",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}), help_text='A JSON object, e.g. {"temperature": 0.2}.',
    )
    backend = forms.ChoiceField(required=False, label="Sandbox backend")
    transplants = forms.BooleanField(
        required=False, initial=True,
        label="Judge each masked function of a failed attempt at n ≥ 2 alone against gold (transplants)",
    )
    description = forms.CharField(
        required=False, max_length=DESCRIPTION_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["suite"].choices = [(name, name) for name in Suite.objects.order_by("name").values_list("name", flat=True)]
        self.fields["agent"].choices = [(name, name) for name in sorted(AGENTS)]
        self.fields["agent"].initial = "react"
        self.fields["backend"].choices = [
            ("", f"this site's default ({settings.SANDBOX_BACKEND})"),
            *((name, name) for name in BACKENDS),
            (EACH_WORKERS_BACKEND, f"{EACH_WORKERS_BACKEND}: each worker's own"),
        ]
        self.suite: Suite | None = None

    def clean_n(self) -> list[int]:
        try:
            return parse_int_list(self.cleaned_data["n"])
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    def clean_model(self) -> str:
        model = self.cleaned_data["model"].strip()
        provider, _, name = model.partition(":")
        if "@" in name:
            raise forms.ValidationError(
                "a model spec here may not name an endpoint (@url): the workers would send their API key there. "
                "The endpoints are the workers' own (OPENAI_BASE_URL, ANTHROPIC_BASE_URL); run_eval takes any spec."
            )
        if model and provider == "openai-compatible":
            raise forms.ValidationError(
                f"openai-compatible needs an endpoint (@url), which the site does not take; use {', '.join(p for p in PROVIDERS if p != provider)}"
            )
        return model

    def clean_agent_config(self) -> dict:
        text = self.cleaned_data["agent_config"].strip()
        if not text:
            return {}
        try:
            config = json.loads(text)
        except ValueError as error:
            raise forms.ValidationError(f"not JSON: {error}") from None
        return config  # anything but an object is run_options_problems' to refuse, as for run_eval

    def clean(self):
        data = super().clean()
        if "suite" in data:
            try:
                self.suite = suite_get(name=data["suite"])
            except Suite.DoesNotExist as error:
                self.add_error("suite", str(error))
        if self.errors:
            return data  # the shared check needs every option parsed
        for problem in run_options_problems(**self._run_options(data, suite=self.suite)):
            self.add_error(problem.field if problem.field in self.fields else None, problem.message)
        return data

    def _run_options(self, data: dict, *, suite) -> dict:
        config = data["agent_config"]
        if isinstance(config, dict):
            config = dict(config)
            if data["history"]:
                config["history"] = data["history"]
            if data["window"] is not None:
                config["window"] = data["window"]
        return {
            "suite": suite, "agent": data["agent"], "model": data["model"], "n_values": data["n"],
            "attempts_per_sample": data["k"], "agent_config": config, "context": data["context"],
            "sample_seed": data["seed"], "sample_cap": data["cap"], "max_steps": data["max_steps"],
            "max_seconds": data["max_seconds"], "max_cost": data["max_cost"],
            "sandbox_backend": data["backend"] or None,
        }

    def run_create_kwargs(self) -> dict:
        """run_create's keyword arguments for the valid options (the owner and enqueueing are the caller's)."""
        data = self.cleaned_data
        return {
            **self._run_options(data, suite=self.suite),
            "n_values": sorted(set(data["n"])),
            "description": data["description"],
            "transplants": data["transplants"],
        }

    def needs_model(self) -> bool:
        return AGENTS[self.cleaned_data["agent"]].needs_model

    def model_priced(self) -> bool:
        """Whether the model's price is known (runs.agents.llm.pricing): unpriced calls count as nothing against max_cost."""
        return bool(price_for(self.cleaned_data["model"].partition(":")[2]))

    def canonical(self) -> dict:
        """The cleaned options as plain JSON: what the estimate was made for, signed into its "Queue it"."""
        data = self.cleaned_data
        return {name: data[name] for name in self.fields}
