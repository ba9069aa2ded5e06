// Leaderboard filters: changing a select submits its form, so the URL (the permalink)
// always names the view on screen. The form works without this script too.
(function () {
  "use strict";
  document.querySelectorAll("form[data-autosubmit] select").forEach(function (select) {
    select.addEventListener("change", function () {
      select.form.submit();
    });
  });
})();
