"""Hiding moves from Submission to Run: one field for runs and submissions (see runs.visibility).

A hidden submission's run becomes hidden; going back, a hidden run's submission becomes hidden
again (runs without a submission could not be hidden before, so they lose nothing that existed).
"""
from django.conf import settings
from django.db import migrations, models


def copy_to_runs(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Run.objects.filter(submission__hidden=True).update(hidden=True)


def copy_to_submissions(apps, schema_editor):
    Submission = apps.get_model("runs", "Submission")
    Submission.objects.filter(run__hidden=True).update(hidden=True)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0004_out_of_scope_edits'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='hidden',
            field=models.BooleanField(default=False, help_text='Hidden runs (and their submission) are seen by their owner and staff only (runs.visibility).'),
        ),
        migrations.AlterField(
            model_name='run',
            name='created_by',
            field=models.ForeignKey(blank=True, help_text='Its owner (a submission\'s uploader); blank for runs started from the command line, which belong to staff.', null=True, on_delete=models.deletion.SET_NULL, related_name='evaluation_runs', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['hidden', 'created_at'], name='run_hidden_created'),
        ),
        migrations.RunPython(copy_to_runs, copy_to_submissions),
        migrations.RemoveIndex(
            model_name='submission',
            name='submission_hidden_created',
        ),
        migrations.RemoveField(
            model_name='submission',
            name='hidden',
        ),
    ]
