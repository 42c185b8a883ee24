# A synthetic classification set (docs/finetuning.md, "Classification"; classify_test.sh):
# n rows of "text<TAB>label" under a header line, each text 3 to 7 common words; about half
# of them also hold the word "prize" somewhere, and are labelled spam, the rest ham. A model
# must find the word anywhere in the text to tell them apart.
#   awk -v n=800 -v seed=7 -f classify_set.awk > spam.tsv
BEGIN {
  if (n == "") n = 800
  srand(seed == "" ? 7 : seed)
  split("the a cat dog sat ran on under mat sun big red blue we go to see it is at", words, " ")
  nw = length(words)
  print "text\tlabel"
  for (i = 0; i < n; i++) {
    len = 3 + int(rand() * 5)
    spam = rand() < 0.5
    at = int(rand() * len)
    text = ""
    for (j = 0; j < len; j++) {
      w = (spam && j == at) ? "prize" : words[1 + int(rand() * nw)]
      text = text (j ? " " : "") w
    }
    print text "\t" (spam ? "spam" : "ham")
  }
}
