from django import forms

from moderation.models import AuditVerdict, ModerationKind


class ModerationForm(forms.Form):
    kind = forms.ChoiceField(
        choices=[c for c in ModerationKind.choices if c[0] != ModerationKind.CELL_VERDICT],
        label="Action",
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="The owner reads this on the page.",
    )


class CellVerdictForm(forms.Form):
    """A moderator's verdict on one task of a run, from the run page (the task is the
    form's hidden `task` input, one form per task)."""

    verdict = forms.ChoiceField(choices=AuditVerdict.choices, label="Verdict")
    quote = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="The evidence, quoted from the trace; the public page shows it.",
    )
    line = forms.IntegerField(
        required=False, min_value=1, label="Trace line", help_text="Where the quote is."
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Why: the public page shows it beside the verdict.",
    )
