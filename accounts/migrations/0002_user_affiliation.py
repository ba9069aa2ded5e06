from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="user",
            name="affiliation",
            field=models.CharField(
                blank=True,
                help_text="Lab, company or university (shown on your results).",
                max_length=200,
            ),
        ),
    ]
