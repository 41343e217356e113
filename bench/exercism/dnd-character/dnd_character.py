class Character:
    def __init__(self):
        pass

def modifier(value):
    pass
