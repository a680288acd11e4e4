"""What the site's browser tests ask a page (tests/unit/site/test_build.py on a small site,
tests/lab/test_site.py on a whole run's): each a JavaScript function for Playwright's ``page.evaluate``,
returning what is wrong. Why outputs wrap: docs/decisions/2026-11-28-gpu-reference-and-site-third-pass.md"""

# a printed line that runs past its box
OVERFLOWING_OUTPUTS = """() => [...document.querySelectorAll(
    'article div.cell_output pre, article pre.servelab-reading')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.slice(0, 60))"""
# a copy button over a line of text: its box meets one of the lines of the code or output it copies
COVERED_BY_COPY = """() => [...document.querySelectorAll('button.servelab-copy')].filter(button => {
  const pre = button.parentElement.querySelector('pre');
  if (!pre) { return false; }
  const box = button.getBoundingClientRect(), text = document.createRange();
  text.selectNodeContents(pre);
  return [...text.getClientRects()].some(r => r.width > 0 && r.left < box.right && r.right > box.left
                                              && r.top < box.bottom && r.bottom > box.top);
}).map(button => button.parentElement.textContent.slice(0, 60))"""
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
