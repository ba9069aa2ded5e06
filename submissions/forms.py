from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from core.sizes import too_large_message
from task_catalog.models import Task


class UploadForm(forms.Form):
    task = forms.ModelChoiceField(
        queryset=Task.objects.filter(current_version__isnull=False).order_by("position", "slug"),
        to_field_name="slug",
        empty_label="Choose a task…",
        error_messages={"invalid_choice": "Unknown task: choose one from the catalog."},
    )
    file = forms.FileField(
        required=False, label="Kernel file (.py)", help_text="A Python file defining ModelNew."
    )
    source = forms.CharField(
        required=False,
        strip=False,
        label="…or paste the source",
        widget=forms.Textarea(attrs={"rows": 16, "cols": 100, "spellcheck": "false"}),
    )
    is_public = forms.BooleanField(
        required=False,
        initial=False,
        label="Publish now",
        help_text="Unticked, only you (and the moderators) see the code and results; "
        "you can publish it later from its page.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data is None:  # forms.Form.clean() returns cleaned_data; the stubs allow None.
            raise RuntimeError("forms.Form.clean() returned None instead of cleaned_data.")
        upload, pasted = data.get("file"), data.get("source") or ""
        if upload and pasted.strip():
            raise ValidationError("Upload a file or paste the source, not both.")
        if not upload and not pasted.strip():
            raise ValidationError("Upload a .py file or paste the kernel's source.")
        limit = settings.D2K_MAX_UPLOAD_BYTES
        if upload and upload.size > limit:
            self.add_error(
                "file", too_large_message(what="The file", size=upload.size, limit=limit)
            )
        return data

    def submission_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        upload = data.get("file")
        if upload:
            # One byte past the limit is enough for the service to say "too large".
            source: str | bytes = upload.read(settings.D2K_MAX_UPLOAD_BYTES + 1)
            filename, size = upload.name, upload.size
        else:
            source, filename, size = data["source"], None, None
        return {
            "size": size,
            "task": data["task"],
            "source": source,
            "filename": filename,
            "is_public": data["is_public"],
        }

    def add_service_error(self, error: ValidationError) -> None:
        """Show a ValidationError of submission_create on the field it concerns."""
        source_field = "file" if self.cleaned_data.get("file") else "source"
        errors = error.message_dict if hasattr(error, "error_dict") else {None: error.messages}
        field_for: dict[str | None, str] = {"source": source_field, "task": "task"}
        for key, messages in errors.items():
            field = field_for.get(key)
            for message in messages:
                self.add_error(field, message)
