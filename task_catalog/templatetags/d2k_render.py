from django import template
from django.urls import NoReverseMatch, reverse

from task_catalog.rendering import code_highlight, markdown_render

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str):
    return markdown_render(text)


@register.filter(name="highlight_python")
def highlight_python_filter(source: str):
    return code_highlight(source)


@register.simple_tag
def submission_url(submission_id: int) -> str:
    # The submissions app owns this URL; the fallback keeps links right before it exists.
    try:
        return reverse("submissions:detail", args=[submission_id])
    except NoReverseMatch:
        return f"/submissions/{submission_id}/"
