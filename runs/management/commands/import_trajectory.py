"""Convert a trajectory of another tool (runs.agents.foreign) and check it as an upload would.

    python manage.py import_trajectory run.traj --print
    python manage.py import_trajectory run.traj --into 12 --sample temperature-scaling_4 --index 0
"""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.agents.foreign import ForeignTrajectoryError, detect_and_convert
from runs.models import Attempt, Submission
from runs.submissions.services import attempt_trajectory_import
from runs.submissions.upload_limits import max_upload_bytes
from runs.submissions.validation import OriginalTrajectory, check_trajectory


class Command(BaseCommand):
    help = (
        "Convert a trajectory written by another tool (an AutoExperiment text log, a mini-swe-agent .traj.json, "
        "a SWE-agent .traj, an Inspect .eval or .json log; detected by content) to our format, check it against "
        "the upload limits, print its summary (--print, the default) or store it as the trajectory of one "
        "attempt of a submission (--into SUBMISSION_ID --sample SAMPLE_ID --index K)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--print", action="store_true", dest="print_only", help="print the summary only (default)")
        parser.add_argument("--into", type=int, metavar="SUBMISSION_ID", help="store it in this submission's attempt")
        parser.add_argument("--sample", help="the attempt's sample_id (with --into)")
        parser.add_argument("--index", type=int, help="the attempt's index, 0..k-1 (with --into)")

    def handle(self, *args, file: Path, print_only, into, sample, index, **options):
        if into is not None and (print_only or sample is None or index is None):
            raise CommandError("--into needs --sample and --index, and cannot be combined with --print")
        try:
            size = file.stat().st_size
        except OSError as error:
            raise CommandError(f"{file}: {error.strerror}") from None
        if size > max_upload_bytes():
            raise CommandError(f"{file}: {size:,} bytes; an upload may hold at most {max_upload_bytes():,}")
        data = file.read_bytes()
        try:
            converted = detect_and_convert(data, file.name)
        except ForeignTrajectoryError as error:
            raise CommandError(f"{file}: {error}") from None
        problems: list[str] = []
        checked = check_trajectory(converted.trajectory, sample, report=problems.append)
        if checked is None:
            raise CommandError(f"{file}: {converted.source_format}: " + "; ".join(problems))
        header, steps = checked["header"], checked["steps"]
        self.stdout.write(
            f"{file.name}: {converted.source_format} {converted.source_version}, {len(steps)} steps, "
            f"{sum(1 for step in steps if step['error'])} with errors, {header['input_tokens']:,} input and "
            f"{header['output_tokens']:,} output tokens, cost "
            + ("unknown" if header["cost_unknown"] else f"${header['cost']:.4f}")
        )
        if into is None:
            return
        submission = Submission.objects.filter(pk=into).select_related("run").first()
        if submission is None:
            raise CommandError(f"no submission {into}")
        try:
            attempt = attempt_trajectory_import(
                submission=submission, sample_id=sample, index=index, trajectory=checked,
                original=OriginalTrajectory(file.name, data),  # kept for download beside the conversion
            )
        except Attempt.DoesNotExist:
            raise CommandError(f"submission {into} has no attempt {index} at sample {sample!r}") from None
        self.stdout.write(f"stored as the trajectory of attempt {attempt.pk}")
