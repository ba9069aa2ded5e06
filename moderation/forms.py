from django import forms

from moderation.models import ModerationKind


class ModerationForm(forms.Form):
    kind = forms.ChoiceField(choices=ModerationKind.choices, label="Action")
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="The owner reads this on the page.",
    )
