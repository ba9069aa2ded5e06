from django import forms
from django.contrib.auth.forms import UserCreationForm

from accounts.models import OPEN_SCOPES, Scope, User


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=True, help_text="Used only to reach you about your results.")

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "email", "affiliation")

    def clean_email(self) -> str:
        email = self.cleaned_data["email"]
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with this email address already exists.")
        return email


class ProfileForm(forms.ModelForm):
    email = forms.EmailField(required=True)

    class Meta:
        model = User
        fields = ("email", "affiliation")

    def clean_email(self) -> str:
        email = self.cleaned_data["email"]
        others = User.objects.filter(email__iexact=email).exclude(pk=self.instance.pk)
        if others.exists():
            raise forms.ValidationError("An account with this email address already exists.")
        return email


class TokenForm(forms.Form):
    name = forms.CharField(max_length=50, help_text="Where it lives, e.g. lab-cluster.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        initial=[Scope.UPLOAD],
        widget=forms.CheckboxSelectMultiple,
        help_text="Reading what you may see needs no scope.",
    )
    # One per rendered form: a reload of the page that showed a new token re-sends
    # the form, and must not issue a second one (views.token_create).
    issue_id = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, user: User, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not user.is_staff:
            scopes = self.fields["scopes"]
            assert isinstance(scopes, forms.MultipleChoiceField)
            scopes.choices = [c for c in Scope.choices if c[0] in OPEN_SCOPES]
