from django.core.management.base import BaseCommand, CommandError

from leaderboard.services import run_select_with_verifier
from runs.agents.llm import MissingAPIKey, ModelError
from runs.benchmark.workspace import WorkspaceError
from runs.models import Run


class Command(BaseCommand):
    help = (
        "For each sample where a run has two or more done attempts, let a verifier choose one and store "
        "the choice (the leaderboard's verifier-selected Pass@1). --verifier oracle picks a passing attempt "
        "when there is one (the upper bound); a model spec (openai:gpt-4o, ...) is the paper's model-as-verifier."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--verifier", required=True, help='"oracle" or a model spec provider:model')
        parser.add_argument("--replace", action="store_true", help="choose again where a selection exists")

    def handle(self, *args, run_id, verifier, replace, **options):
        try:
            run = Run.objects.get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(f"no run {run_id}") from None
        try:
            report = run_select_with_verifier(run=run, verifier=verifier, replace=replace)
        except (ValueError, MissingAPIKey) as error:
            raise CommandError(str(error)) from None
        except WorkspaceError as error:
            raise CommandError(f"{error} (selections made so far are kept)") from None
        except ModelError as error:
            raise CommandError(f"the verifier model failed (selections made so far are kept): {error}") from None
        cost = "unknown" if report.cost is None else f"${report.cost:.4f}"
        self.stdout.write(self.style.SUCCESS(
            f"Run {run.pk}, verifier {verifier}: {report.selected} sample(s) chosen, {report.existing} kept from before, "
            f"{report.single} with fewer than two done attempts skipped; {report.fallbacks} fallback(s); cost {cost}."
        ))
