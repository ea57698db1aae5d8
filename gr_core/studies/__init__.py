"""Studies: measurements of the methods (each imports the method; the method never imports a study).

- :mod:`~gr_core.studies.chat_without_questions`: the chat on a graph that comes without questions: a reasoner trained
  on questions generated from the graph, the training-free path ranker, two-entity questions, where they fail.
"""
