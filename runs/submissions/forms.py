"""Forms of the submission pages and of the admin's flag action."""
from django import forms

from runs.limits import human_bytes
from runs.submissions.upload_limits import max_upload_bytes


class UploadForm(forms.Form):
    file = forms.FileField(
        label="Results file",
        allow_empty_file=True,  # an empty file gets the validator's message, like any other problem
        help_text="A .jsonl file, or a .zip holding results.jsonl and trajectories/*.json.",
        widget=forms.ClearableFileInput(attrs={"accept": ".jsonl,.json,.zip,application/zip,application/jsonl"}),
    )
    reexecute = forms.BooleanField(
        required=False,
        label="Re-execute every final patch in a fresh sandbox (the submission is marked verified when all are done)",
    )
    no_transplants = forms.BooleanField(
        required=False,
        label="After re-execution, do not judge each masked function of a failed attempt at n ≥ 2 alone against gold "
        "(transplants: one more sandbox run per masked function)",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text += f" At most {human_bytes(max_upload_bytes())}."


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, required=False, label="Name",
        help_text="What the token is for, e.g. the machine or the CI job that uploads with it.",
    )


class FlagForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000,
        help_text="Shown on the submission's page next to the flag.",
    )
