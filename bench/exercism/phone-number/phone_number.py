class PhoneNumber:
    def __init__(self, number):
        pass
