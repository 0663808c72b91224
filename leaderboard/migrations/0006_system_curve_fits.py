from django.db import migrations, models
from django.db.models import F


def standings_marked_changed(apps, schema_editor):
    """Every stored system has no difficulty curve yet: marked as changed, the next refresh (the workers'
    upkeep queues one) fits it; meanwhile its pages show its other numbers, marked as being updated."""
    apps.get_model("leaderboard", "SystemStanding").objects.update(changes=F("changes") + 1)


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0005_system_page_rows'),
    ]

    operations = [
        migrations.AddField(
            model_name='systemstanding',
            name='curve_fits',
            field=models.JSONField(blank=True, default=dict, help_text='Its difficulty curve per counting rule ("verified": re-executed attempts only, "all": every counted attempt): leaderboard.curves.CurveFit.as_dict(); {} until a refresh computes it.'),
        ),
        migrations.RunPython(standings_marked_changed, migrations.RunPython.noop),
    ]
