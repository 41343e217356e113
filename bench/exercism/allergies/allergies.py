class Allergies:

    def __init__(self, score):
        pass

    def allergic_to(self, item):
        pass

    @property
    def lst(self):
        pass
