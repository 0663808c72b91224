"""Django's password-reset pages, 404 while no mail server is configured and rate-limited when one is.

Included before django.contrib.auth.urls, so these patterns answer the same paths and names.
"""
from django.contrib.auth import views as auth_views
from django.urls import path

from autoexperiment_site.abuse import rate_limit, rate_limited, requires_mail

_reset_form = auth_views.PasswordResetView.as_view()


@requires_mail
@rate_limited("password-reset")
def password_reset(request):
    """Ask for a reset link; also limited per address mailed, so many senders cannot flood one inbox."""
    if request.method == "POST":
        email = request.POST.get("email", "").strip().lower()
        if email:
            rate_limit(request, "password-reset-email", key=email)
    return _reset_form(request)


urlpatterns = [
    path("password_reset/", password_reset, name="password_reset"),
    path("password_reset/done/", requires_mail(auth_views.PasswordResetDoneView.as_view()), name="password_reset_done"),
    path(
        "reset/<uidb64>/<token>/",
        requires_mail(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path("reset/done/", requires_mail(auth_views.PasswordResetCompleteView.as_view()), name="password_reset_complete"),
]
