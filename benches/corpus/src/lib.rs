// empty: the corpus is this package's dependencies
