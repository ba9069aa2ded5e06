from django.db import models


class BaseModel(models.Model):
    """Every table of the portal records when a row was made and last changed."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
