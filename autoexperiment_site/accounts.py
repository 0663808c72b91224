"""Self-service accounts: the sign-up page, behind settings.SIGNUP_ENABLED (off by default).

`signup` is a plain function view so that limits (django-ratelimit, django-axes) can wrap it
where the URL is declared.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.validators import ASCIIUsernameValidator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

# Named because more than one backend may be configured (django-axes adds its own first), and
# login() needs to be told which one vouches for a user it did not authenticate.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class SignupForm(UserCreationForm):
    """Django's form, with usernames in ASCII letters, digits and @.+-_ only: names are shown beside
    runs and submissions, and a look-alike letter from another script ("аlice" with a Cyrillic а)
    would pass for someone else's."""

    def clean_username(self):
        username = super().clean_username()
        ASCIIUsernameValidator()(username)
        return username


def signup_enabled() -> bool:
    return settings.SIGNUP_ENABLED


def _next_url(request) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return settings.LOGIN_REDIRECT_URL


def signup(request):
    """Create an account (username and password, Django's UserCreationForm) and sign in with it."""
    if not signup_enabled():
        raise Http404("sign-up is turned off on this site (SIGNUP_ENABLED); ask staff for an account")
    if request.user.is_authenticated:
        return redirect(_next_url(request))
    if request.method == "POST":
        form = SignupForm(request.POST)
        if form.is_valid():
            user = form.save()
            login(request, user, backend=MODEL_BACKEND)
            return redirect(_next_url(request))
        status = 400
    else:
        form = SignupForm()
        status = 200
    return render(request, "registration/signup.html", {"form": form, "next": _next_url(request)}, status=status)


def signup_context(request) -> dict:
    """Context processor: whether pages offer the sign-up link."""
    return {"signup_enabled": signup_enabled()}
