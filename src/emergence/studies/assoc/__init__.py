"""Study A, token associations (Im et al.): stories, corpus, closed-form theory, comparison, report."""
