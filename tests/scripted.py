"""A random.Random whose draws a test writes down, for generators read draw by draw."""

import random


class Scripted(random.Random):
    """random() returns the given numbers in order; running out (an extra draw) raises IndexError, or,
    with a `tail` generator, goes on with its draws."""

    def __init__(self, draws, tail=None):
        super().__init__(0)
        self.draws, self.tail = list(draws), tail

    def random(self):
        return self.draws.pop(0) if self.draws or self.tail is None else self.tail.random()
