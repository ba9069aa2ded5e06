from django import forms
from django.conf import settings

from core.sizes import too_large_message
from moderation.models import AuditVerdict
from runs.models import Run
from runs.scanners import RULES


class BundleUploadForm(forms.Form):
    bundle = forms.FileField(
        label="Run bundle (.zip)",
        help_text="manifest.json, kernels/<task>.py, traces/<task>.jsonl, proposals/<task>.md.",
    )
    is_public = forms.BooleanField(
        required=False,
        initial=False,
        label="Publish now",
        help_text="Unticked, the run (kernels, traces, proposals, results) is yours alone "
        "(and the moderators'); you can publish it later from its page.",
    )

    confirm_redaction = forms.BooleanField(
        required=False,
        initial=False,
        label="Publish with secrets redacted",
        help_text="If the traces or proposals hold API keys, tokens, e-mail addresses or home "
        "paths, the public sees them replaced with [redacted …]; you and the moderators see "
        "the raw files. Unticked, such a bundle is refused when published now.",
    )

    def clean_bundle(self):
        upload = self.cleaned_data["bundle"]
        limit = settings.D2K_RUN_BUNDLE_MAX_BYTES
        if upload.size > limit:
            raise forms.ValidationError(
                too_large_message(what="The bundle", size=upload.size, limit=limit)
            )
        return upload


class PairForm(forms.Form):
    """Pair the run with one of the owner's runs, or (no choice) unpair it."""

    other = forms.ModelChoiceField(queryset=Run.objects.none(), required=False, label="Twin")

    def __init__(self, *args, candidates=None, **kwargs):
        super().__init__(*args, **kwargs)
        if candidates is not None:
            self.fields["other"].queryset = candidates


class AuditSearchForm(forms.Form):
    """Staff's search across runs: by scanner rule, by cell verdict, or both."""

    rule = forms.ChoiceField(
        choices=[("", "any rule"), *((r.name, f"{r.name}: {r.title}") for r in RULES)],
        required=False,
    )
    verdict = forms.ChoiceField(
        choices=[("", "any verdict"), *AuditVerdict.choices], required=False
    )
