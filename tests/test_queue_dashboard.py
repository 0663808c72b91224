"""django-rq's staff dashboards: an address naming no queue, job, worker or scheduler answers 404,
never 500 (django-rq looks them up without checking they exist)."""
import pytest
from django.contrib.auth.models import User
from django.test import Client

NAMES_NOTHING = [
    "queues/0/no-such-job/delete/",
    "queues/0/no-such-job/requeue/",
    "queues/0/no-such-job/enqueue/",
    "queues/9/",
    "queues/9/failed/",
    "workers/9/",
    "workers/0/no-such-worker/",
    "workers/0/rq:worker:no-such-worker/",
    "schedulers/0/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("prefix", ["/django-rq/", "/admin/django_rq/dashboard/"])
def test_an_address_naming_nothing_answers_404(redis_queue, prefix):
    client = Client(raise_request_exception=False)
    client.force_login(User.objects.create_superuser("staff", "staff@example.org", "pw"))
    assert client.get(prefix).status_code == 200
    for address in NAMES_NOTHING:
        for method in (client.get, client.post):
            response = method(prefix + address)
            assert response.status_code in (404, 405), (method.__name__, address, response.status_code)
    assert client.get(prefix + "queues/0/").status_code == 200  # what exists is still served
