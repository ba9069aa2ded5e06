"""What the evaluator tells the rest of the portal: after a result changed, and each
worker's round.

The evaluator does not know who builds on its verdicts. Runs derive their state from
them and scoring recomputes its scores; both listen here (`runs.signals`,
`scoring.signals`) instead of the evaluator calling up into them.
"""

from django.dispatch import Signal

# Sent with sender=Evaluation once the transaction that changed an evaluation's
# result has committed. Keyword arguments:
#   evaluation_id, submission_id, run_id (None for a lone submission),
#   change: "verdict" (a verdict was stored) or "review" (an admin's review of a
#   flagged verdict: the status stays, whether it counts changes).
evaluation_result_changed = Signal()

# Sent with sender=None by each worker's main process after its reaper round (every
# D2K_REAP_INTERVAL_S): work of other apps that a worker's restart may have lost is
# taken up again there (runs sends again the validation of a bundle left waiting).
worker_round = Signal()

VERDICT = "verdict"
REVIEW = "review"
