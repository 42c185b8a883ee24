# Multiple-choice items made from a text of random words, for tests/cli/choice_test.sh and
# docs/finetuning.md's example (no download):
#   awk -v mode=text -v words=150 -f choice_items.awk > words.txt
#   awk -v mode=items -v words=150 -v n=300 -v k=4 -f choice_items.awk > items.jsonl
# The text is `words` words of 25 animals, on one line. Item i: the context is four words of
# the text, its true ending the next two, the k - 1 wrong endings two words from elsewhere in
# the text (so an untrained model has no reason to prefer any), the true one at a random
# place. Park-Miller's generator (exact in doubles), so every awk makes the same files.
function rnd(n) { seed = (seed * 48271) % 2147483647; return int(seed / 2147483647 * n) }
BEGIN {
  nw = split("ant bee cat dog elk fox gnu hen ibis jay kite lark mole newt owl pig quail " \
             "rat seal toad urchin vole wasp yak zebra", w, " ")
  seed = 12345
  for (i = 0; i < words; i++) t[i] = w[rnd(nw) + 1]
  if (mode == "text") {
    for (i = 0; i < words; i++) printf "%s%s", (i ? " " : ""), t[i]
    print ""
    exit
  }
  for (i = 0; i < n; i++) {
    p = 4 + i % (words - 6)
    truth = t[p] " " t[p + 1]
    label = rnd(k)
    out = "{\"ctx\": \"" t[p - 4] " " t[p - 3] " " t[p - 2] " " t[p - 1] "\", \"endings\": ["
    for (e = 0; e < k; e++) {
      if (e == label) x = truth
      else do { q = rnd(words - 1); x = t[q] " " t[q + 1] } while (x == truth)
      out = out (e ? ", " : "") "\"" x "\""
    }
    print out "], \"label\": " label "}"
  }
}
